"""PyTorch allocation traces of GPT training beyond the two shared ones, and
PyTorch's live peak reserved / peak allocated beside strata's (issue 12).

Needs ../shared/anchors/torch_gpt.py copied into the folder given as the
first argument (.gpu on the device machine). Run from the repository root:

    python3 bench/torch_traces.py .gpu traces OUTDIR   # one CSV per config
    python3 bench/torch_traces.py .gpu heldout OUTDIR  # the held-out set
    python3 bench/torch_traces.py .gpu live            # JSON lines

traces: each config trains with the default allocator (warm=1, 3 steps,
as torch_gpt.trace records the shared ones) with the memory history on,
and the snapshot's device trace is written as trace-NAME.csv (action,
addr, size, stream), the format bench-alloc -trace replays. The configs
vary what the shared traces do not: model shape, batch, precision,
attention and checkpointing.

heldout: as traces, for HELDOUT: shapes, batches and precision/attention/
checkpointing combinations none of TRACES has (recorded in session 38),
kept apart (bench/traces/heldout/) so that placement is judged on traces
it was not tuned on.

live: the runs of ../shared/anchors/torch_frag.py's table and the bf16
ones strata's bench rows use, each in a process of its own per allocator
setting (default, expandable_segments:True), 2 warm-up and 5 timed steps:
peak reserved over peak allocated, the figure train-gpt -bench prints as
peak_reserved_bytes / peak_bytes.
"""
import json
import os
import subprocess
import sys

SHAPES = {
    "gpt2-medium": dict(V=50257, T=1024, L=24, H=16, D=1024, B=8),
    "char-b32": dict(V=256, T=256, L=6, H=6, D=384, B=32),
    "mid": dict(V=8192, T=512, L=8, H=8, D=512, B=16),
    "gpt2-b4": dict(V=50257, T=1024, L=12, H=12, D=768, B=4),
    # The held-out set's shapes.
    "small": dict(V=512, T=128, L=4, H=4, D=256, B=64),
    "char-b48": dict(V=256, T=256, L=6, H=6, D=384, B=48),
    "deep": dict(V=256, T=256, L=12, H=6, D=384, B=24),
    "wide": dict(V=4096, T=512, L=4, H=12, D=768, B=8),
    "mid-b24": dict(V=8192, T=256, L=6, H=8, D=512, B=24),
    "gpt2-b6": dict(V=50257, T=1024, L=12, H=12, D=768, B=6),
}

# name, config, mode, sdpa, ckpt
TRACES = [
    ("char-bf16", "char", "bf16", True, False),
    ("char-fp16-sdpa", "char", "fp16", True, False),
    ("char-fp32-plain", "char", "fp32", False, False),
    ("char-bf16-ckpt", "char", "bf16", True, True),
    ("char-b32-fp16-ckpt-plain", "char-b32", "fp16", False, True),
    ("mid-fp32", "mid", "fp32", True, False),
    ("mid-fp16-ckpt", "mid", "fp16", True, True),
    ("gpt2-b4-fp32", "gpt2-b4", "fp32", True, False),
    ("gpt2-fp16-ckpt", "gpt2", "fp16", True, True),
    ("gpt2-bf16", "gpt2", "bf16", True, False),
]

# The held-out set (same fields as TRACES).
HELDOUT = [
    ("small-fp32", "small", "fp32", True, False),
    ("small-bf16-ckpt", "small", "bf16", True, True),
    ("char-b48-fp16-ckpt", "char-b48", "fp16", True, True),
    ("char-b48-fp32-ckpt-plain", "char-b48", "fp32", False, True),
    ("deep-fp16-ckpt-plain", "deep", "fp16", False, True),
    ("deep-bf16", "deep", "bf16", True, False),
    ("wide-bf16-ckpt", "wide", "bf16", True, True),
    ("wide-fp32-plain", "wide", "fp32", False, False),
    ("mid-b24-fp16-ckpt", "mid-b24", "fp16", True, True),
    ("mid-b24-bf16-plain", "mid-b24", "bf16", False, False),
    ("gpt2-b6-fp16-ckpt", "gpt2-b6", "fp16", True, True),
    ("gpt2-b6-fp32", "gpt2-b6", "fp32", True, False),
]

# config, mode, sdpa, ckpt: torch_frag.py's table, then bf16 rows
LIVE = [
    ("char", "fp32", False, False), ("char", "fp16", False, True),
    ("gpt2", "fp32", False, False), ("gpt2", "fp16", False, True),
    ("char", "bf16", True, False), ("gpt2", "bf16", True, False),
    ("gpt2-medium", "bf16", True, False),
]

CHILD = r'''
import json, sys, torch
sys.path.insert(0, sys.argv[1])
import torch_gpt as tg
torch.backends.cuda.matmul.allow_tf32 = False
tg.CONFIGS.update(json.loads(sys.argv[2]))
kind, plan, out = sys.argv[3], json.loads(sys.argv[4]), sys.argv[5]
for item in plan:
    if kind == "live":
        name, mode, sdpa, ckpt = item
        r = tg.run(name, mode, sdpa=sdpa, ckpt=ckpt, steps=5, warm=2)
        r["reserved_over_alloc"] = r["peak_reserved_mib"] / r["peak_alloc_mib"]
        r["alloc_conf"] = __import__("os").environ.get("PYTORCH_CUDA_ALLOC_CONF", "")
        print("RESULT " + json.dumps(r), flush=True)
    else:
        tag, name, mode, sdpa, ckpt = item
        torch.cuda.empty_cache()
        torch.cuda.memory._record_memory_history(max_entries=2_000_000)
        r = tg.run(name, mode, sdpa=sdpa, ckpt=ckpt, steps=3, warm=1)
        snap = torch.cuda.memory._snapshot()
        torch.cuda.memory._record_memory_history(enabled=None)
        n = 0
        with open(f"{out}/trace-{tag}.csv", "w") as f:
            f.write("action,addr,size,stream\n")
            # One device a file: bench-alloc replays one device's pool.
            devs = [d for d in snap["device_traces"] if d]
            if len(devs) > 1:
                raise SystemExit(f"{tag}: {len(devs)} devices allocated; a trace file holds one")
            for dev in devs:
                for e in dev:
                    # An oom entry has no addr: PyTorch names it device_free.
                    addr = e.get("addr", e.get("device_free", ""))
                    f.write(f"{e['action']},{addr},{e['size']},{e['stream']}\n")
                    n += 1
        r.update(trace=tag, events=n)
        print("RESULT " + json.dumps(r), flush=True)
    torch.cuda.empty_cache()
'''


def child(anchors, kind, plan, out="", conf=""):
    env = dict(os.environ, PYTORCH_CUDA_ALLOC_CONF=conf)
    p = subprocess.run([sys.executable, "-c", CHILD, anchors, json.dumps(SHAPES), kind, json.dumps(plan), out],
                       env=env, capture_output=True, text=True)
    for line in p.stdout.splitlines():
        if line.startswith("RESULT "):
            print(line[7:], flush=True)
    if p.returncode:
        print(json.dumps({"error": p.stderr[-600:], "kind": kind, "alloc_conf": conf}), flush=True)


def main():
    if len(sys.argv) < 3 or sys.argv[2] not in ("traces", "heldout", "live"):
        sys.exit("usage: torch_traces.py ANCHORS_DIR traces|heldout OUTDIR | live")
    anchors, kind = sys.argv[1], sys.argv[2]
    if kind in ("traces", "heldout"):
        out = sys.argv[3]
        os.makedirs(out, exist_ok=True)
        for t in (TRACES if kind == "traces" else HELDOUT):  # a process each: one failure loses one trace
            child(anchors, "traces", [t], out)
    else:
        for conf in ("", "expandable_segments:True"):
            child(anchors, kind, LIVE, conf=conf)


if __name__ == "__main__":
    main()
