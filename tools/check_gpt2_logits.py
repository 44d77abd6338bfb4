#!/usr/bin/env python3
"""Check strata's GPT logits against PyTorch, in both weight layouts.

One command (Go's examples/generate built as GENERATE, weights from
`train-gpt -out W`), which checks both layouts and reports the speed:

    python3 tools/check_gpt2_logits.py --generate GENERATE --weights W [--device cuda]

It runs GENERATE to save W again in Hugging Face's layout and in nanoGPT's
(`-save X -save-layout hf|nanogpt`), has it write the prompt's tokens and
logits for each copy (`-dump-logits`, on --device), recomputes the logits
with PyTorch from the same file and prints the largest absolute difference,
for the full forward and for the KV cache. It exits 1 when one exceeds
--atol (1e-5) + --rtol (1e-6) x the largest |logit|: float32's own error
grows with the logits (for train-gpt's addition model, logits up to 31,
PyTorch float32 itself is 1.5e-5 from float64), so the bound does too. It
also prints the distances to a float64 model and PyTorch float32's own.
Last, it times GENERATE's greedy generation (tokens/s, --runs runs, the
first a warm-up).

One dump only (no Go needed here):

    go run ./examples/generate -weights W -prompt "12+34=" -dump-logits L.json
    python3 tools/check_gpt2_logits.py --weights W --logits L.json

The PyTorch model is GPT-2 (nanoGPT's module tree, GELU with the tanh
approximation as GPT-2's gelu_new, LayerNorm eps 1e-5, biases, the head
tied to the token table), defined below; when the transformers package is
installed, its GPT2LMHeadModel is checked too. The safetensors file is read
here (F32, F16, BF16, F64): neither the safetensors nor the transformers
package is needed. The layout (Hugging Face's Conv1D projections stored
(in, out), names with or without "transformer.", or nanoGPT's nn.Linear
(out, in)) is told from the shapes, as strata's nn.LoadWeights does.
"""

import argparse
import json
import math
import os
import re
import shlex
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

CONV1D = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight")
# The attention's non-parameter mask buffers some checkpoints hold.
BUFFER = re.compile(r"^(transformer\.)?h\.[0-9]+\.attn\.(bias|masked_bias)$")


def read_safetensors(path):
    """Return ({name: float32 torch tensor}, metadata) of a safetensors file."""
    with open(path, "rb") as f:
        buf = f.read()
    n = int.from_bytes(buf[:8], "little")
    header = json.loads(buf[8:8 + n])
    meta = header.pop("__metadata__", {}) or {}
    data = buf[8 + n:]
    out = {}
    for name, info in header.items():
        lo, hi = info["data_offsets"]
        raw, shape, dt = data[lo:hi], info["shape"], info["dtype"]
        if BUFFER.match(name):
            continue  # the attention's mask buffers, whatever their dtype
        if dt == "F32":
            a = np.frombuffer(raw, "<f4")
        elif dt == "F64":
            a = np.frombuffer(raw, "<f8")
        elif dt == "F16":
            a = np.frombuffer(raw, "<f2").astype(np.float32)
        elif dt == "BF16":
            a = (np.frombuffer(raw, "<u2").astype(np.uint32) << 16).view(np.float32)
        else:
            raise SystemExit(f"{path}: tensor {name!r} has dtype {dt}, not a float")
        out[name] = torch.from_numpy(a.astype(np.float32).reshape(shape).copy())
    return out, meta


def to_nanogpt(ts, width):
    """Rename and transpose a state dict of either layout to nanoGPT's.

    The layout is told by the projections' shapes: c_attn (3C, C), c_fc
    (4C, C) and mlp.c_proj (C, 4C) are nn.Linear's (nanoGPT), their
    transposes Conv1D's (Hugging Face); by the names when no projection
    tells (no "transformer." is Hugging Face's).
    """
    C = width
    linear = {"attn.c_attn.weight": (3 * C, C), "mlp.c_fc.weight": (4 * C, C), "mlp.c_proj.weight": (C, 4 * C)}
    votes, prefixed, sd = set(), False, {}
    for name, t in ts.items():
        if name == "lm_head.weight":
            continue  # tied to the token table; checked below
        prefixed |= name.startswith("transformer.")
        key = name if name.startswith("transformer.") else "transformer." + name
        for suffix, shape in linear.items():
            if key.endswith("." + suffix):
                if tuple(t.shape) == shape:
                    votes.add("nanogpt")
                elif tuple(t.shape) == shape[::-1]:
                    votes.add("hf")
                else:
                    raise SystemExit(f"{name} has shape {tuple(t.shape)}: want {shape} or {shape[::-1]}")
        sd[key] = t
    if len(votes) > 1:
        raise SystemExit("cannot tell the layout: some projections are (out, in), others (in, out)")
    layout = votes.pop() if votes else ("nanogpt" if prefixed else "hf")
    if layout == "hf":
        for key in sd:
            if key.endswith(CONV1D):
                sd[key] = sd[key].t().contiguous()
    if "lm_head.weight" in ts and not torch.equal(ts["lm_head.weight"], sd["transformer.wte.weight"]):
        raise SystemExit("lm_head.weight differs from the token table: not a tied GPT-2")
    return sd, layout


class Attention(nn.Module):
    def __init__(self, C, H):
        super().__init__()
        self.H = H
        self.c_attn = nn.Linear(C, 3 * C)
        self.c_proj = nn.Linear(C, C)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (z.view(B, T, self.H, C // self.H).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(C // self.H))
        mask = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        att = F.softmax(att.masked_fill(~mask, float("-inf")), dim=-1)
        return self.c_proj((att @ v).transpose(1, 2).contiguous().view(B, T, C))


class MLP(nn.Module):
    def __init__(self, C):
        super().__init__()
        self.c_fc = nn.Linear(C, 4 * C)
        self.c_proj = nn.Linear(4 * C, C)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, C, H):
        super().__init__()
        self.ln_1, self.attn = nn.LayerNorm(C, eps=1e-5), Attention(C, H)
        self.ln_2, self.mlp = nn.LayerNorm(C, eps=1e-5), MLP(C)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, V, T, L, H, C):
        super().__init__()
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(V, C), wpe=nn.Embedding(T, C),
            h=nn.ModuleList([Block(C, H) for _ in range(L)]), ln_f=nn.LayerNorm(C, eps=1e-5)))

    def forward(self, idx):
        tr = self.transformer
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = tr.wte(idx) + tr.wpe(pos)
        for b in tr.h:
            x = b(x)
        return tr.ln_f(x) @ tr.wte.weight.t()


def hf_logits(sd, cfg, idx, dtype, device):
    """Logits of transformers' GPT2LMHeadModel, or None without transformers."""
    try:
        from transformers import GPT2Config, GPT2LMHeadModel
    except ImportError:
        return None
    hc = GPT2Config(vocab_size=cfg["vocab"], n_positions=cfg["context"], n_embd=cfg["width"],
                    n_layer=cfg["layers"], n_head=cfg["heads"], activation_function="gelu_new",
                    resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, layer_norm_epsilon=1e-5)
    m = GPT2LMHeadModel(hc)
    hsd = {}
    for k, t in sd.items():
        hsd[k] = t.t().contiguous() if k.endswith(CONV1D) else t
    missing, unexpected = m.load_state_dict(hsd, strict=False)
    missing = [k for k in missing if k != "lm_head.weight" and not BUFFER.match(k)]
    if missing or unexpected:
        raise SystemExit(f"GPT2LMHeadModel: missing {missing}, unexpected {unexpected}")
    m.tie_weights()
    m = m.to(device=device, dtype=dtype).eval()
    with torch.no_grad():
        return m(idx).logits.double().cpu()


def check(weights, logits_path, atol, rtol, dtype, device):
    """Compare one dump with PyTorch; return True when within tolerance.

    A difference passes when it is at most atol + rtol * (the largest
    |logit| of the reference). A float64 model on the CPU is computed too:
    strata's distance to it, beside PyTorch's own float32 distance to it,
    shows how much of a difference float32 itself makes.
    """
    with open(logits_path) as f:
        dump = json.load(f)
    cfg = dump["config"]
    ts, _ = read_safetensors(weights)
    sd, layout = to_nanogpt(ts, cfg["width"])
    tokens = [dump["tokens"]]

    def nanogpt(dt, dev):
        m = GPT(cfg["vocab"], cfg["context"], cfg["layers"], cfg["heads"], cfg["width"])
        m.load_state_dict(sd, strict=True)
        m = m.to(device=dev, dtype=dt).eval()
        with torch.no_grad():
            return m(torch.tensor(tokens, dtype=torch.long, device=dev))[0].double().cpu()

    name = str(dtype).replace("torch.", "")
    refs = {f"PyTorch {name} on {device}": nanogpt(dtype, device)}
    try:
        hf = hf_logits(sd, cfg, torch.tensor(tokens, dtype=torch.long, device=device), dtype, device)
    except Exception as e:  # an API change of transformers must not hide the main check
        print(f"  transformers GPT2LMHeadModel: NOT CHECKED ({type(e).__name__}: {e})")
        hf = None
    if hf is not None:
        refs[f"transformers GPT2LMHeadModel {name} on {device}"] = hf[0]
    ref64 = nanogpt(torch.float64, "cpu")
    ok = True
    print(f"{weights} ({layout} layout, strata on {dump.get('device', '?')}, {len(tokens[0])} tokens, "
          f"vocabulary {cfg['vocab']}; PyTorch {torch.__version__}):")
    for rname, r in refs.items():
        scale = r.abs().max().item()
        bound = atol + rtol * scale
        for key in ("logits", "cached_logits"):
            got = torch.tensor(dump[key], dtype=torch.float64)
            worst = (got - r).abs().max().item()
            good = worst <= bound
            ok &= good
            what = "full forward" if key == "logits" else "KV cache"
            print(f"  {what:12s} vs {rname}: max abs diff {worst:.3g} "
                  f"(largest |logit| {scale:.3g}, bound {bound:.3g}) {'ok' if good else 'FAIL'}")
    for key in ("logits", "cached_logits"):
        got = torch.tensor(dump[key], dtype=torch.float64)
        what = "full forward" if key == "logits" else "KV cache"
        print(f"  {what:12s} vs PyTorch float64 on cpu: max abs diff {(got - ref64).abs().max().item():.3g}")
    if dtype != torch.float64:
        own = (refs[f"PyTorch {name} on {device}"] - ref64).abs().max().item()
        print(f"  (PyTorch {name} on {device} itself vs float64: max abs diff {own:.3g})")
    return ok


def tokenizer_of(path, vocab):
    """The tokenizer generate uses for the weights at path by default: the
    one train-gpt recorded in the metadata, else byte for a vocabulary of
    256 and gpt2 otherwise (as generate's pickTokenizer guesses)."""
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        meta = json.loads(f.read(n)).get("__metadata__") or {}
    name = meta.get("tokenizer")
    if name in ("byte", "gpt2"):
        return name
    return "byte" if vocab == 256 else "gpt2"


def run(cmd):
    print("$", " ".join(shlex.quote(c) for c in cmd), flush=True)
    subprocess.run(cmd, check=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--weights", required=True, help="a safetensors file strata saved (train-gpt -out)")
    ap.add_argument("--logits", help="the JSON file `generate -dump-logits` wrote for --weights (one check)")
    ap.add_argument("--generate", help="Go's examples/generate binary: check both layouts and time generation")
    ap.add_argument("--prompt", default="739+931=0761\n925+341=", help="the prompt of the dumps and the timing")
    ap.add_argument("--device", default="cpu", help="strata's and PyTorch's device (cpu or cuda)")
    ap.add_argument("--strata-device", help="strata's device when not --device (cpu, cuda, cuda:N)")
    ap.add_argument("--dtype", default="float32", choices=["float32", "float64"], help="PyTorch's dtype")
    ap.add_argument("--atol", type=float, default=1e-5, help="absolute tolerance")
    ap.add_argument("--rtol", type=float, default=1e-6,
                    help="tolerance relative to the largest |logit| (float32's own error grows with it)")
    ap.add_argument("--max-new", type=int, help="tokens per timed generation (default: up to the context's end; "
                    "past it every token recomputes the whole context)")
    ap.add_argument("--runs", type=int, default=4, help="timed generations (the first warms up)")
    a = ap.parse_args()
    dtype = getattr(torch, a.dtype)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    if a.logits:
        sys.exit(0 if check(a.weights, a.logits, a.atol, a.rtol, dtype, a.device) else 1)
    if not a.generate:
        ap.error("give --logits (one dump) or --generate (both layouts)")
    dev = a.strata_device or a.device
    ok, max_new = True, a.max_new
    with tempfile.TemporaryDirectory() as tmp:
        for layout in ("hf", "nanogpt"):
            w = os.path.join(tmp, f"{layout}.safetensors")
            run([a.generate, "-weights", a.weights, "-device", dev, "-save", w, "-save-layout", layout])
            d = os.path.join(tmp, f"{layout}.json")
            run([a.generate, "-weights", w, "-device", dev, "-prompt", a.prompt, "-dump-logits", d])
            ok &= check(w, d, a.atol, a.rtol, dtype, a.device)
            with open(d) as f:
                dump = json.load(f)
            if max_new is None:
                max_new = dump["config"]["context"] - len(dump["tokens"])
        timing = [a.generate, "-weights", a.weights, "-device", dev, "-prompt", a.prompt, "-temperature", "0",
                  "-max-new", str(max_new), "-runs", str(a.runs), "-quiet"]
        # Every timed run generates max_new tokens: gpt2's end-of-text must
        # not stop it. The byte tokenizer has none, and generate refuses
        # -stop-eot for it (a flag the run would ignore).
        if tokenizer_of(a.weights, dump["config"]["vocab"]) != "byte":
            timing.append("-stop-eot=false")
        run(timing)
    print("all logits agree" if ok else "SOME LOGITS DISAGREE")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
