"""Self-test of the golden tooling: the checks must be able to fail.

Writes small files to a temporary directory and confirms that readback.load
rejects each kind of corruption, that safetensors_io.save rejects bad input,
that ops.fd_check catches a wrong gradient, and that verify.check_case
catches a wrong forward-only output and a wrong cast gradient.

Run: /usr/bin/python3 tools/golden/selftest.py
"""

import json
import os
import struct
import tempfile

import numpy as np
import torch

import ops
import ops_cases
import readback
import safetensors_io
import verify


def expect(exc, fn, what):
    try:
        fn()
    except exc:
        return
    raise AssertionError(f"not rejected: {what}")


def corrupt(path, good, edit):
    n = struct.unpack("<Q", good[:8])[0]
    header = json.loads(good[8:8 + n])
    blob = edit(header, good, n)
    with open(path, "wb") as f:
        f.write(blob)


def rebuild(header, data):
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + data


def main():
    tensors = {"a": torch.arange(6, dtype=torch.float64).reshape(2, 3), "b": torch.tensor(7, dtype=torch.int32),
               "c": torch.tensor([float("-inf"), 1.5], dtype=torch.float32)}
    meta = {"k": "v"}
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "t.safetensors")
        safetensors_io.save(path, tensors, meta)
        readback.check_roundtrip(path, tensors, meta)
        good = open(path, "rb").read()
        bad = os.path.join(d, "bad.safetensors")
        cases = {
            "truncated data": lambda h, g, n: g[:-1],
            "header length too big": lambda h, g, n: struct.pack("<Q", 1 << 40) + g[8:],
            "unknown dtype": lambda h, g, n: rebuild({**h, "a": {**h["a"], "dtype": "Q7"}}, g[8 + n:]),
            "wrong byte count": lambda h, g, n: rebuild({**h, "a": {**h["a"], "shape": [3, 3]}}, g[8 + n:]),
            "overlapping tensors": lambda h, g, n: rebuild({**h, "b": {**h["b"], "data_offsets": [52, 56]}}, g[8 + n:]),
            "trailing data bytes": lambda h, g, n: g + b"\0" * 8,
            "misaligned F64": lambda h, g, n: rebuild(
                {**h, "b": {**h["b"], "data_offsets": [0, 4]}, "a": {**h["a"], "data_offsets": [4, 52]}},
                g[8 + n + 48:8 + n + 52] + g[8 + n:8 + n + 48] + g[8 + n + 52:]),
            "NUL header padding": lambda h, g, n: g[:8] + g[8:8 + n].replace(b" ", b"\0") + g[8 + n:],
            "non-string metadata": lambda h, g, n: rebuild({**h, "__metadata__": {"k": 1}}, g[8 + n:]),
        }
        for what, edit in cases.items():
            corrupt(bad, good, edit)
            expect((readback.FormatError, ValueError), lambda: readback.load(bad), what)
        expect(ValueError, lambda: safetensors_io.save(path, {"x": torch.zeros(2, dtype=torch.float16)}, {}),
               "float16 tensor")
        expect(TypeError, lambda: safetensors_io.save(path, {"x": torch.zeros(2)}, {"k": 3}), "int metadata")
        expect(AssertionError, lambda: readback.check_roundtrip(path, {**tensors, "a": tensors["a"] + 1e-15}, meta),
               "value change of 1e-15")
    case = next(c for c in ops_cases.CASES if c.name == "layer_norm")
    g = ops.generator("selftest")
    inputs = case.make(g)
    leaves = {k: v.clone().requires_grad_() for k, v in inputs.items()}
    y = case.fn(leaves)
    dy = torch.randn(y.shape, generator=g, dtype=y.dtype)
    grads = dict(zip(leaves, torch.autograd.grad(y, list(leaves.values()), dy)))
    ops.fd_check(case, inputs, grads, dy)
    grads["w"] = grads["w"] * (1 + 1e-4)
    expect(AssertionError, lambda: ops.fd_check(case, inputs, grads, dy), "gradient off by 1e-4 relative")
    # verify.check_case on a forward-only case and on the cast (no finite
    # differences): a stored value one ulp off is caught.
    for name, k in (("maximum", "y"), ("cast_bf16", "y"), ("cast_bf16", "dx")):
        case = next(c for c in ops_cases.CASES if c.name == name)
        meta, out = ops.run_autograd_case(case)
        stored = {n: v.detach().contiguous().numpy().copy() for n, v in out.items()}
        verify.check_case(case, meta, stored)
        flat = stored[k].reshape(-1)
        flat[-1] = np.nextafter(flat[-1], flat.dtype.type(np.inf))
        expect(AssertionError, lambda: verify.check_case(case, meta, stored), f"{name}.{k} one ulp off")
    print("selftest: ok")


if __name__ == "__main__":
    main()
