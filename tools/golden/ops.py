"""Generate tensor/testdata/golden_ops.safetensors from PyTorch.

For every case in ops_cases.CASES: float64 inputs, the forward output y, a
random upstream gradient dy, and the input gradients d<input> from autograd,
stored as "<case>.<tensor>" (forward-only cases: inputs and y).  Every
gradient is checked against a central finite difference along a random
direction before it is written (but a cast's, which is dy rounded).  The
optimizer/clipping cases of optim_cases.CASES follow.  Each case draws from
its own generator seeded by crc32(case name), so adding a case never changes
the others.  Metadata: "<case>" -> JSON description, "cases" -> JSON list of
case names, "torch_version", "generator".

With --only CASE[,CASE...], only the named cases are computed; every other
case is copied bit for bit from the existing output file.  Use it to add or
change a case without rewriting the others: another BLAS or torch build
changes the last bits of some (matmul's), which would churn the file.

Run: /usr/bin/python3 tools/golden/ops.py [-o output.safetensors] [--only CASE,...]
"""

import argparse
import json
import os
import zlib

import torch

import ops_cases
import optim_cases
import readback
import safetensors_io

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_OUT = os.path.join(HERE, "..", "..", "tensor", "testdata", "golden_ops.safetensors")


def generator(name):
    return torch.Generator().manual_seed(zlib.crc32(name.encode()))


def as_i32(name, t):
    if t.min() < -2**31 or t.max() >= 2**31:
        raise ValueError(f"{name}: int values out of I32 range")
    return t.to(torch.int32)


def fd_check(case, inputs, grads, dy, h=1e-6):
    """Check <dy, (f(x+hv) - f(x-hv)) / 2h> == <grad, v> for each float input."""
    for k, gk in grads.items():
        v = torch.randn(inputs[k].shape, generator=generator(case.name + "/fd/" + k), dtype=torch.float64)
        plus = case.fn({**inputs, k: inputs[k] + h * v})
        minus = case.fn({**inputs, k: inputs[k] - h * v})
        diff = torch.where(torch.isfinite(plus), plus - minus, torch.zeros_like(plus))
        num = (dy * diff).sum().item() / (2 * h)
        ana = (gk * v).sum().item()
        if abs(num - ana) > 1e-6 * max(1.0, abs(ana)):
            raise AssertionError(f"{case.name}: d{k} fails finite differences: {ana} vs {num}")


def run_autograd_case(case):
    g = generator(case.name)
    inputs = case.make(g)
    for k in ("y", "dy") + tuple("d" + k for k in inputs):
        if k in inputs:
            raise ValueError(f"{case.name}: input name {k!r} collides with an output name")
    leaves = {k: v.clone().requires_grad_(case.grad and v.is_floating_point()) for k, v in inputs.items()}
    y = case.fn(leaves)
    out = {k: (v if v.is_floating_point() else as_i32(f"{case.name}.{k}", v)) for k, v in inputs.items()}
    out["y"] = y.detach()
    meta = {**case.meta, "inputs": list(inputs), "outputs": ["y"],
            "dtype": safetensors_io.DTYPES[y.dtype][0]}
    if not case.grad:  # forward only: no dy, no gradients
        return {**meta, "forward_only": True}, out
    dy = torch.randn(y.shape, generator=g, dtype=y.dtype)
    diff = [k for k, v in leaves.items() if v.requires_grad]
    grads = dict(zip(diff, torch.autograd.grad(y, [leaves[k] for k in diff], dy)))
    if case.fd:
        with torch.no_grad():
            fd_check(case, inputs, grads, dy)
    out["dy"] = dy
    out.update({"d" + k: v for k, v in grads.items()})
    return {**meta, "grads": ["d" + k for k in diff]}, out


def kept_case(old, name):
    """The stored (metadata JSON, tensors) of case name in old, a readback.load
    result, for --only."""
    tensors, meta, _ = old
    if name not in meta:
        raise ValueError(f"case {name!r} is not in the existing file: name it in --only")
    prefix = name + "."
    return meta[name], {k[len(prefix):]: torch.from_numpy(v.copy()) for k, v in tensors.items() if k.startswith(prefix)}


def build(only=None, old=None):
    """Compute every case, or with only (a set of names) just those, taking
    the others from old (readback.load of the existing file)."""
    tensors, metadata, names = {}, {}, []

    def add(name, compute):
        if name in names or name in ("cases", "torch_version", "generator"):
            raise ValueError(f"duplicate or reserved case name {name!r}")
        names.append(name)
        if only is None or name in only:
            meta, out = compute()
            metadata[name] = json.dumps(meta, sort_keys=True)
        else:
            metadata[name], out = kept_case(old, name)
        for k, v in out.items():
            tensors[f"{name}.{k}"] = v.detach().contiguous()

    for case in ops_cases.CASES:
        add(case.name, lambda: run_autograd_case(case))
    for name, fn in optim_cases.CASES:
        add(name, lambda: fn(generator(name)))
    if only is not None and only - set(names):
        raise ValueError(f"--only names unknown cases: {sorted(only - set(names))}")
    metadata["cases"] = json.dumps(names)
    metadata["torch_version"] = torch.__version__
    metadata["generator"] = "tools/golden/ops.py"
    return tensors, metadata


def main():
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    ap = argparse.ArgumentParser(description="Write the PyTorch golden values for tensor ops.")
    ap.add_argument("-o", "--out", default=os.path.normpath(DEFAULT_OUT), help="output .safetensors file")
    ap.add_argument("--only", help="comma-separated cases to compute; the others are copied from the output file")
    args = ap.parse_args()
    path = args.out
    if args.only is None:
        tensors, metadata = build()
    else:
        tensors, metadata = build({n for n in args.only.split(",") if n}, readback.load(path))
    size = safetensors_io.save(path, tensors, metadata)
    readback.check_roundtrip(path, tensors, metadata)
    print(f"wrote {path}: {len(json.loads(metadata['cases']))} cases, {len(tensors)} tensors, {size} bytes")


if __name__ == "__main__":
    main()
