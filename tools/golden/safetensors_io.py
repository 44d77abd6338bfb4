"""Minimal safetensors writer (no dependency on the `safetensors` package).

Layout of a file:

    u64 little-endian N | N bytes of JSON header, space-padded | raw data

The header maps each tensor name to {"dtype", "shape", "data_offsets"}
(offsets are [begin, end) into the data section, which follows the header
immediately) and may hold "__metadata__", a str -> str map.  Tensors are laid
out back to back in insertion order, so the data section has no holes, which
is what strict readers (including the reference Rust one) demand.  N is padded
with spaces to a multiple of 8 so the data section starts 8-byte aligned.
"""

import json
import math
import os

import numpy as np
import torch

# torch dtype -> (safetensors dtype string, little-endian numpy dtype)
DTYPES = {
    torch.float64: ("F64", np.dtype("<f8")),
    torch.float32: ("F32", np.dtype("<f4")),
    torch.int32: ("I32", np.dtype("<i4")),
    torch.int64: ("I64", np.dtype("<i8")),
}
ITEMSIZE = {code: npdt.itemsize for code, npdt in DTYPES.values()}


def _raw(name, t):
    """Return (dtype string, shape, little-endian bytes) for tensor t."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"tensor {name!r}: expected torch.Tensor, got {type(t).__name__}")
    if t.dtype not in DTYPES:
        raise ValueError(f"tensor {name!r}: unsupported dtype {t.dtype}; "
                         f"supported: {sorted(v[0] for v in DTYPES.values())}")
    code, npdt = DTYPES[t.dtype]
    arr = t.detach().cpu().contiguous().numpy().astype(npdt, copy=False)
    return code, list(t.shape), arr.tobytes(order="C")


def save(path, tensors, metadata):
    """Write tensors (name -> torch.Tensor) and metadata (str -> str) to path.

    The file is written to a temporary name and renamed, so a failed run never
    leaves a truncated file behind.
    """
    if not tensors:
        raise ValueError(f"{path}: no tensors to write")
    for k, v in metadata.items():
        if not isinstance(k, str) or not isinstance(v, str):
            raise TypeError(f"{path}: metadata must map str to str, got {k!r}: {type(v).__name__}")
    raws = {}
    for name, t in tensors.items():
        if name == "__metadata__":
            raise ValueError(f"{path}: tensor name '__metadata__' is reserved")
        raws[name] = _raw(name, t)
    header = {"__metadata__": dict(metadata), **{name: None for name in raws}}
    # Widest elements first (a stable sort): every tensor then starts at a
    # multiple of its element size, and readers may view it in place.
    order = sorted(raws, key=lambda n: -ITEMSIZE[raws[n][0]])
    chunks, offset = [], 0
    for name in order:
        code, shape, data = raws[name]
        want = math.prod(shape) * ITEMSIZE[code]
        if len(data) != want:
            raise AssertionError(f"tensor {name!r}: {len(data)} bytes, shape {shape} needs {want}")
        header[name] = {"dtype": code, "shape": shape, "data_offsets": [offset, offset + len(data)]}
        chunks.append(data)
        offset += len(data)
    hbytes = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hbytes += b" " * (-len(hbytes) % 8)
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(len(hbytes).to_bytes(8, "little"))
        f.write(hbytes)
        for c in chunks:
            f.write(c)
    os.replace(tmp, path)
    return 8 + len(hbytes) + offset
