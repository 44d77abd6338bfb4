"""Strict, independent safetensors reader used to check what the writer made.

It shares no code with safetensors_io.py on purpose: it parses the file with
struct/json/numpy only and rejects anything a strict reader would reject (bad
header length, non-space padding, unknown dtype, wrong byte counts, holes or
overlaps in the data section, non-string metadata).
"""

import json
import math
import struct

import numpy as np

_NP = {"F64": "<f8", "F32": "<f4", "I64": "<i8", "I32": "<i4"}
_NP_NAME = {v: k for k, v in _NP.items()}


class FormatError(ValueError):
    pass


def load(path):
    """Return (tensors: name -> numpy array, metadata: dict, header_len)."""
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 8:
        raise FormatError(f"{path}: {len(blob)} bytes, too short for the 8-byte header length")
    (n,) = struct.unpack("<Q", blob[:8])
    if n > len(blob) - 8:
        raise FormatError(f"{path}: header length {n} exceeds file size {len(blob)}")
    if n % 8:
        raise FormatError(f"{path}: header length {n} is not a multiple of 8")
    raw = blob[8:8 + n]
    text = raw.rstrip(b" ")
    if not text.startswith(b"{") or not text.endswith(b"}"):
        raise FormatError(f"{path}: header is not a JSON object padded with spaces")
    header = json.loads(text.decode("utf-8"))
    data = blob[8 + n:]
    meta = header.pop("__metadata__", {})
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in meta.items()):
        raise FormatError(f"{path}: __metadata__ must map strings to strings")
    spans, out = [], {}
    for name, info in header.items():
        if set(info) != {"dtype", "shape", "data_offsets"}:
            raise FormatError(f"{path}: tensor {name!r} has keys {sorted(info)}")
        dt, shape, (lo, hi) = info["dtype"], info["shape"], info["data_offsets"]
        if dt not in _NP:
            raise FormatError(f"{path}: tensor {name!r} has unsupported dtype {dt!r}")
        if not all(isinstance(d, int) and d >= 0 for d in shape):
            raise FormatError(f"{path}: tensor {name!r} has bad shape {shape}")
        size = np.dtype(_NP[dt]).itemsize * math.prod(shape)
        if not 0 <= lo <= hi <= len(data) or hi - lo != size:
            raise FormatError(f"{path}: tensor {name!r} offsets [{lo},{hi}) do not hold "
                              f"{dt}{shape} ({size} bytes) in a {len(data)}-byte data section")
        if lo % np.dtype(_NP[dt]).itemsize:
            raise FormatError(f"{path}: tensor {name!r} at data offset {lo} is not aligned to its {dt} elements")
        spans.append((lo, hi, name))
        out[name] = np.frombuffer(data[lo:hi], dtype=_NP[dt]).reshape(shape)
    end = 0
    for lo, hi, name in sorted(spans):
        if lo != end:
            raise FormatError(f"{path}: tensor {name!r} starts at {lo}, expected {end} (hole or overlap)")
        end = hi
    if end != len(data):
        raise FormatError(f"{path}: data section has {len(data) - end} trailing bytes")
    return out, meta, n


def check_roundtrip(path, tensors, metadata):
    """Assert the file at path holds exactly tensors (torch) and metadata."""
    got, meta, _ = load(path)
    if meta != metadata:
        raise AssertionError(f"{path}: metadata differs after read-back")
    if list(got) != list(tensors):
        raise AssertionError(f"{path}: tensor names differ after read-back")
    for name, t in tensors.items():
        want = t.detach().cpu().contiguous().numpy()
        g = got[name]
        if g.shape != want.shape:
            raise AssertionError(f"{path}: {name}: shape {g.shape} != {want.shape}")
        if want.dtype.kind == "i":
            ok = np.array_equal(g.astype(np.int64), want.astype(np.int64))
        else:
            ok = g.dtype == want.dtype and g.tobytes() == want.astype(g.dtype.newbyteorder("<")).tobytes()
        if not ok:
            raise AssertionError(f"{path}: {name}: values differ after read-back")
