"""Generate nn/testdata/golden_gpt_amp_<dtype>.safetensors: the GPT of gpt.py
(same float32 weights, same batch) run under torch.autocast.

    bf16: on the CPU (PyTorch's CPU autocast dtype; committed, tested on CI)
    fp16: on CUDA (run on the GPU machine; the test that reads it needs a GPU)

Stored: every parameter (float32 master weights), idx, targets, logits
(float32 copy of autocast's output), loss, and grad.<param> after
loss.backward() (run outside the autocast region, as PyTorch recommends;
backward ops run in the dtype their forward ran in). No loss scaling:
the values here are small enough for float16.

Run: /usr/bin/python3 tools/golden/gpt_amp.py --dtype bf16 [--device cpu] [-o dir]
     python3 tools/golden/gpt_amp.py --dtype fp16 --device cuda -o OUT
"""

import argparse
import copy
import os

import torch

import gpt
import readback
import safetensors_io


def build(dtype, device="cpu"):
    """(tensors, metadata, logits dtype) of the autocast run, dtype "bf16"
    or "fp16" (verify.py compares a fresh bf16 build with the file)."""
    torch.manual_seed(0)
    if device == "cpu":
        torch.set_num_threads(1)
    dt = {"bf16": torch.bfloat16, "fp16": torch.float16}[dtype]
    model = copy.deepcopy(gpt.base_model()).to(device)
    idx, targets = gpt.batch()
    idx, targets = idx.to(device), targets.to(device)
    out = {}
    names = [n for n, _ in model.named_parameters()]
    for n, p in model.named_parameters():
        out[n] = p.detach().float().cpu().clone()
    out["idx"], out["targets"] = idx.to(torch.int32).cpu(), targets.to(torch.int32).cpu()
    with torch.autocast(device_type=device.split(":")[0], dtype=dt):
        logits, loss = model(idx, targets)
    loss.backward()
    out["logits"], out["loss"] = logits.detach().float().cpu(), loss.detach().float().reshape(()).cpu()
    for n, p in model.named_parameters():
        out["grad." + n] = p.grad.detach().float().cpu().clone()
    meta = gpt.metadata(names, "F32")
    meta.update({"autocast": dtype, "autocast_device": device, "logits_dtype": str(logits.dtype),
                 "generator": "tools/golden/gpt_amp.py"})
    return out, meta, logits.dtype


def main():
    ap = argparse.ArgumentParser(description="Write PyTorch autocast golden values for the GPT model.")
    ap.add_argument("--dtype", choices=["bf16", "fp16"], required=True)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("-o", "--outdir", default=os.path.normpath(gpt.DEFAULT_DIR))
    a = ap.parse_args()
    out, meta, ldt = build(a.dtype, a.device)
    path = os.path.join(a.outdir, f"golden_gpt_amp_{a.dtype}.safetensors")
    size = safetensors_io.save(path, out, meta)
    readback.check_roundtrip(path, out, meta)
    print(f"wrote {path}: {len(out)} tensors, {size} bytes, loss {out['loss'].item():.10f} (logits {ldt})")


if __name__ == "__main__":
    main()
