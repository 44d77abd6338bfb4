"""Generate nn/testdata/golden_layers.safetensors from PyTorch.

Golden values for nn's small-model layers and losses (nn/loss_test.go,
nn/norm_test.go, nn/sequential_test.go):

  mse_mean, mse_sum, mse_none   F.mse_loss(x, w, reduction=...): inputs x
                                and target w, output y, upstream dy, dx, dw
  rmsnorm                       RMSNorm with eps 1e-6 over the last axis
  rmsnorm_f32                   float32, eps=None (finfo(float32).eps), small
                                inputs so that eps matters
  seq.*                         Sequential(Linear(3,8), ReLU, Linear(8,8), SiLU,
                                RMSNorm(8), Linear(8,2)) in float64 on a batch
                                x (5,3) against target (5,2), MSE (mean) loss:
                                parameters under their state_dict names,
                                seq.y, seq.loss, seq.grad.<name>

Debian's python3-torch is 1.13, which predates torch.nn.RMSNorm (2.4); the
RMSNorm here is that module's formula, x * rsqrt(mean(x^2, -1) + eps) *
weight, with eps=None meaning torch.finfo(x.dtype).eps as there.  Each case
draws from its own generator seeded by crc32(case name).

Run: /usr/bin/python3 tools/golden/nn_layers.py [-o output.safetensors]
"""

import argparse
import json
import os
import zlib

import torch
import torch.nn as nn
import torch.nn.functional as F

import readback
import safetensors_io

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_OUT = os.path.join(HERE, "..", "..", "nn", "testdata", "golden_layers.safetensors")
F64 = torch.float64


def generator(name):
    return torch.Generator().manual_seed(zlib.crc32(name.encode()))


def rms_norm(x, weight, eps=None):
    if eps is None:
        eps = torch.finfo(x.dtype).eps
    y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    return y if weight is None else y * weight


class RMSNorm(nn.Module):
    """torch.nn.RMSNorm(dim) of PyTorch 2.4+, for torch 1.13."""

    def __init__(self, dim, eps=None):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return rms_norm(x, self.weight, self.eps)


def grads_case(name, inputs, fn, out, meta):
    """Run fn on inputs (requires grad), store inputs, y, dy and d<input>."""
    g = generator(name)
    leaves = {k: v.clone().requires_grad_(True) for k, v in inputs.items()}
    y = fn(**leaves)
    dy = torch.randn(y.shape, generator=g, dtype=F64).to(y.dtype)
    grads = torch.autograd.grad(y, list(leaves.values()), dy)
    for k, v in inputs.items():
        out[f"{name}.{k}"] = v
    out[f"{name}.y"] = y.detach()
    out[f"{name}.dy"] = dy
    for k, gk in zip(leaves, grads):
        out[f"{name}.d{k}"] = gk
    return meta


def mse_cases(out, meta):
    for red in ("mean", "sum", "none"):
        name = f"mse_{red}"
        g = generator(name)
        x = torch.randn(3, 4, 5, generator=g, dtype=F64)
        w = torch.randn(3, 4, 5, generator=g, dtype=F64)
        meta[name] = json.dumps({"op": "mse_loss", "reduction": red})
        grads_case(name, {"x": x, "w": w}, lambda x, w: F.mse_loss(x, w, reduction=red), out, meta)


def rmsnorm_cases(out, meta):
    g = generator("rmsnorm")
    x = torch.randn(2, 3, 8, generator=g, dtype=F64)
    w = torch.randn(8, generator=g, dtype=F64)
    meta["rmsnorm"] = json.dumps({"op": "rms_norm", "eps": 1e-6})
    grads_case("rmsnorm", {"x": x, "w": w}, lambda x, w: rms_norm(x, w, 1e-6), out, meta)
    g = generator("rmsnorm_f32")
    x = (torch.randn(4, 16, generator=g, dtype=F64) * 1e-3).float()
    w = torch.randn(16, generator=g, dtype=F64).float()
    meta["rmsnorm_f32"] = json.dumps({"op": "rms_norm", "eps": None})
    grads_case("rmsnorm_f32", {"x": x, "w": w}, lambda x, w: rms_norm(x, w), out, meta)


def seq_case(out, meta):
    torch.manual_seed(zlib.crc32(b"seq"))
    model = nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Linear(8, 8), nn.SiLU(),
                          RMSNorm(8), nn.Linear(8, 2)).to(F64)
    with torch.no_grad():  # a non-trivial RMSNorm weight
        model[4].weight.copy_(torch.rand(8, generator=generator("seq/rms"), dtype=F64) + 0.5)
    g = generator("seq")
    x = torch.randn(5, 3, generator=g, dtype=F64)
    target = torch.randn(5, 2, generator=g, dtype=F64)
    y = model(x)
    loss = F.mse_loss(y, target)
    loss.backward()
    names = []
    for k, p in model.named_parameters():
        out[f"seq.{k}"] = p.detach().clone()
        names.append(k)
    out["seq.x"], out["seq.target"] = x, target
    out["seq.y"], out["seq.loss"] = y.detach(), loss.detach()
    for k, p in model.named_parameters():
        out[f"seq.grad.{k}"] = p.grad
    meta["seq"] = json.dumps({"model": "Sequential(Linear(3,8), ReLU, Linear(8,8), SiLU, RMSNorm(8), Linear(8,2))",
                              "loss": "mse_loss mean", "params": names})


def build():
    """All cases: (tensors, metadata), as the file holds them (verify.py
    compares a fresh build with the file)."""
    out, meta = {}, {}
    mse_cases(out, meta)
    rmsnorm_cases(out, meta)
    seq_case(out, meta)
    meta["torch_version"] = torch.__version__
    meta["generator"] = "tools/golden/nn_layers.py"
    return out, meta


def main():
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    ap = argparse.ArgumentParser(description="Write the PyTorch golden values for nn's layers and losses.")
    ap.add_argument("-o", "--output", default=os.path.normpath(DEFAULT_OUT))
    path = ap.parse_args().output
    out, meta = build()
    size = safetensors_io.save(path, out, meta)
    readback.check_roundtrip(path, out, meta)
    print(f"wrote {path}: {len(out)} tensors, {size} bytes")


if __name__ == "__main__":
    main()
