"""PyTorch beside examples/memstrategies in the same device call (issue 10):
gpt2-medium (B8 T1024) capped at 4 GiB of device memory with
torch.cuda.set_per_process_memory_fraction, in fp16 and fp32 with
activation checkpointing and SDPA attention, then unconstrained in fp16,
and gpt2 fp32 eager unconstrained (the memstrategies table's reference).
The allocator setting comes from PYTORCH_CUDA_ALLOC_CONF (bench/gpu-hybrid.sh
runs it with and without expandable segments). The same runs as
../shared/anchors/torch_frag.py, one process per capped run (a cap cannot be
lifted), using its torch_gpt.run.

Run: python3 bench/torch_capped.py DIR_WITH_torch_gpt.py   (JSON lines)
"""
import json, os, subprocess, sys

CHILD = r'''
import json, os, sys, torch
sys.path.insert(0, sys.argv[1])
import torch_gpt as tg
torch.backends.cuda.matmul.allow_tf32 = False
tg.CONFIGS["gpt2-medium"] = dict(V=50257, T=1024, L=24, H=16, D=1024, B=8)
name, mode, sdpa, ckpt, cap = json.loads(sys.argv[2])
if cap:
    torch.cuda.set_per_process_memory_fraction(cap * 2**30 / torch.cuda.get_device_properties(0).total_memory)
try:
    r = tg.run(name, mode, sdpa=sdpa, ckpt=ckpt, steps=5, warm=2)
except torch.OutOfMemoryError as e:
    r = dict(config=name, mode=mode, sdpa=sdpa, ckpt=ckpt, oom=str(e)[:200])
r["cap_gib"] = cap
r["alloc_conf"] = os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")
print("RESULT " + json.dumps(r), flush=True)
'''

plan = [
    ("gpt2-medium", "fp16", True, True, 4),
    ("gpt2-medium", "fp32", True, True, 4),
    ("gpt2-medium", "bf16", True, True, 4),
    ("gpt2-medium", "bf16", True, True, 0),
]
if not os.environ.get("PYTORCH_CUDA_ALLOC_CONF"):
    plan.append(("gpt2", "fp32", False, False, 0))
for p in plan:
    out = subprocess.run([sys.executable, "-c", CHILD, sys.argv[1], json.dumps(p)], capture_output=True, text=True)
    for line in out.stdout.splitlines():
        if line.startswith("RESULT "):
            print(line[7:], flush=True)
    if out.returncode:
        print(json.dumps({"run": p, "error": out.stderr[-400:]}), flush=True)
