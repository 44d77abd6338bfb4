"""Read the golden files back with readback.py, check them, print a summary.

Checks, beyond the strict format checks of readback.load:
  * every file is under 1 MiB and records torch_version;
  * golden_ops: the tensors are exactly those the case metadata lists
    (inputs, outputs, dy, grads), each autograd case's y is recomputed from
    the stored inputs (bit-exact) and its stored gradients pass a
    finite-difference check against the stored dy (a cast's, which is dy
    rounded, are recomputed with autograd, bit-exact); forward-only cases
    recompute y; optimizer and clipping cases match the numpy reference of
    optim_ref.py.  Every case is checked; the failing ones are listed;
  * golden_gpt, golden_gpt64: the parameter set is exactly nanoGPT's, each
    parameter has a gradient of its shape, and loading the stored
    parameters into a fresh model reproduces the stored logits, loss and
    gradients;
  * golden_layers: nn_layers.py rebuilds every tensor and the metadata
    bit-exactly;
  * golden_gpt_amp_*: the tensor set, the parameters and the batch are
    gpt.py's (bit-exact); the CPU bf16 file is rebuilt bit-exactly by
    gpt_amp.py; a CUDA file (fp16, made on a GPU host with another torch)
    cannot be recomputed here, so its logits, loss and gradients are
    checked against the float32 golden_gpt within the dtype's rounding.

A failing file does not stop the others; the exit status is 1 if any failed.

Run: /usr/bin/python3 tools/golden/verify.py [-q] [FILE ...]   (FILE: relative to the repository root)
"""

import argparse
import json
import os
import sys
import traceback

import numpy as np
import torch

import gpt
import gpt_amp
import nanogpt
import nn_layers
import ops
import ops_cases
import optim_ref
import readback

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
FILES = ["tensor/testdata/golden_ops.safetensors", "nn/testdata/golden_gpt.safetensors",
         "nn/testdata/golden_gpt64.safetensors", "nn/testdata/golden_layers.safetensors",
         "nn/testdata/golden_gpt_amp_bf16.safetensors", "nn/testdata/golden_gpt_amp_fp16.safetensors"]


def summary(tensors):
    for name, a in tensors.items():
        fin = a[np.isfinite(a)] if a.dtype.kind == "f" else a
        rng = f"[{fin.min():.4g}, {fin.max():.4g}]" if fin.size else "[]"
        extra = f" non-finite={a.size - fin.size}" if fin.size != a.size else ""
        print(f"  {name:48s} {a.dtype.str:4s} {str(list(a.shape)):16s} {rng}{extra}")


def check_ops(tensors, meta):
    cases = json.loads(meta["cases"])
    listed = set()
    for name in cases:
        info = json.loads(meta[name])
        listed |= {f"{name}.{k}" for k in info["inputs"] + info["outputs"] + (["dy"] + info["grads"]
                                                                               if "grads" in info else [])}
    assert listed == set(tensors), f"metadata and tensors disagree: {sorted(listed ^ set(tensors))}"
    table = {c.name: c for c in ops_cases.CASES}
    failed = []
    for name in cases:
        info = json.loads(meta[name])
        own = {k.split(".", 1)[1]: v for k, v in tensors.items() if k.split(".", 1)[0] == name}
        try:
            if name in table:
                check_case(table[name], info, own)
            else:
                check_optim(name, info, own)
        except AssertionError as e:
            failed.append(str(e))
    assert not failed, f"{len(failed)} of {len(cases)} ops cases fail:\n    " + "\n    ".join(failed)
    print(f"  ops: {len(cases)} cases consistent ({len(table)} recomputed, gradients finite-difference checked)")


def check_case(case, info, stored):
    """Recompute y of one ops case from its stored inputs (bit-exact) and
    check its stored gradients."""
    def t(k):
        a = stored[k]
        return torch.from_numpy(a.copy()) if a.dtype.kind == "f" else torch.from_numpy(a.astype(np.int64))
    inputs = {k: t(k) for k in info["inputs"]}
    y = case.fn(inputs)
    assert y.numpy().tobytes() == stored["y"].tobytes(), f"{case.name}: y does not recompute"
    if info.get("forward_only"):
        return
    grads = {g[1:]: t(g) for g in info["grads"]}
    if case.fd:
        ops.fd_check(case, inputs, grads, t("dy"))
        return
    leaves = {k: v.clone().requires_grad_(v.is_floating_point()) for k, v in inputs.items()}
    got = torch.autograd.grad(case.fn(leaves), [leaves[k] for k in grads], t("dy"))
    for (k, want), g in zip(grads.items(), got):
        assert g.numpy().tobytes() == want.numpy().tobytes(), f"{case.name}: d{k} does not recompute"


def close(name, got, want):
    """PyTorch's result against the float64 numpy reference."""
    tol = 1e-6 if got.dtype == np.float32 else 1e-13
    err = np.max(np.abs(got.astype(np.float64) - want) / (np.abs(want) + 1e-3))
    assert err < tol, f"{name}: differs from the reference formula by {err:.3g} (tolerance {tol})"


def check_optim(name, info, t):
    f64 = {k: v.astype(np.float64) for k, v in t.items()}
    if info["op"] == "clip_grad_norm":
        outs, n = optim_ref.clip([f64["g0"], f64["g1"]], info["max_norm"])
        close(name + ".total_norm", t["total_norm"], np.float64(n))
        close(name + ".g0_after", t["g0_after"], outs[0])
        close(name + ".g1_after", t["g1_after"], outs[1])
        return
    ref = {"adamw": optim_ref.adamw, "sgd": optim_ref.sgd}[info["op"]]
    ps, state = ref(f64["p0"], f64["g"], **info)
    for k, p in enumerate(ps, 1):
        close(f"{name}.p{k}", t[f"p{k}"], p)
    for k, v in state.items():
        close(f"{name}.{k}", t[k], v)


def check_gpt(tensors, meta):
    cfg = nanogpt.Config(**{k: v for k, v in json.loads(meta["config"]).items()
                            if k in nanogpt.Config.__dataclass_fields__})
    dtype = {"F32": torch.float32, "F64": torch.float64}[meta["dtype"]]
    model = nanogpt.GPT(cfg).to(dtype)
    names = [n for n, _ in model.named_parameters()]
    assert names == json.loads(meta["params"]), "parameter names differ from nanoGPT's"
    want = set(names) | {"grad." + n for n in names} | {"step1." + n for n in json.loads(meta["step1"])} | {
        "idx", "targets", "logits", "loss", "loss_after_step"}
    assert want == set(tensors), f"unexpected or missing tensors: {sorted(want ^ set(tensors))}"
    state = {n: torch.from_numpy(tensors[n].copy()) for n in names}
    state["lm_head.weight"] = state["transformer.wte.weight"]
    model.load_state_dict(state, strict=True)
    idx = torch.from_numpy(tensors["idx"].astype(np.int64))
    targets = torch.from_numpy(tensors["targets"].astype(np.int64))
    logits, loss = model(idx, targets)
    loss.backward()
    assert np.array_equal(logits.detach().numpy(), tensors["logits"]), "logits do not recompute"
    assert loss.item() == tensors["loss"].item(), "loss does not recompute"
    for n, p in model.named_parameters():
        assert tensors["grad." + n].shape == tuple(p.shape), f"grad.{n}: wrong shape"
        assert np.array_equal(p.grad.numpy(), tensors["grad." + n]), f"grad.{n} does not recompute"
    print(f"  gpt: {len(names)} parameters; logits, loss and gradients recompute bit-exactly")


def same(name, got, want):
    """got (torch) equals want (numpy) bit for bit, dtype included."""
    g = got.detach().cpu().contiguous().numpy()
    assert g.dtype == want.dtype and g.shape == want.shape and g.tobytes() == want.tobytes(), \
        f"{name} does not recompute"


def check_layers(tensors, meta):
    want, wmeta = nn_layers.build()
    assert wmeta == meta, "metadata differs from nn_layers.py's"
    assert set(want) == set(tensors), f"unexpected or missing tensors: {sorted(set(want) ^ set(tensors))}"
    for k, v in want.items():
        same(k, v.to(torch.int32) if not v.is_floating_point() else v, tensors[k])
    print(f"  layers: {len(want)} tensors and the metadata rebuild bit-exactly (nn_layers.py)")


def check_amp(tensors, meta):
    dtype, device = meta["autocast"], meta["autocast_device"]
    names = json.loads(meta["params"])
    want = set(names) | {"grad." + n for n in names} | {"idx", "targets", "logits", "loss"}
    assert want == set(tensors), f"unexpected or missing tensors: {sorted(want ^ set(tensors))}"
    for n, p in gpt.base_model().named_parameters():
        same(n, p, tensors[n])
    idx, targets = gpt.batch()
    same("idx", idx.to(torch.int32), tensors["idx"])
    same("targets", targets.to(torch.int32), tensors["targets"])
    if device == "cpu":
        out, wmeta, _ = gpt_amp.build(dtype, device)
        assert wmeta == meta, "metadata differs from gpt_amp.py's"
        for k, v in out.items():
            same(k, v, tensors[k])
        print(f"  amp {dtype} ({device}): parameters, batch, logits, loss and gradients rebuild bit-exactly")
        return
    # Made on a GPU host with another torch: not recomputable here. Checked
    # against the float32 run of the same model within the dtype's rounding
    # (the bounds of nn/amp_golden_test.go: 8u for logits and loss, 40u for
    # gradients).
    ref, _, _ = readback.load(os.path.join(ROOT, "nn/testdata/golden_gpt.safetensors"))
    u = {"fp16": 2.0 ** -11, "bf16": 2.0 ** -8}[dtype]
    for k, bound in [("loss", 8 * u), ("logits", 8 * u)] + [("grad." + n, 40 * u) for n in names]:
        e = np.max(np.abs(tensors[k] - ref[k])) / np.max(np.abs(ref[k]))
        assert e < bound, f"{k}: {e:.3g} from the float32 golden run, over {bound:.3g}"
    print(f"  amp {dtype} ({device}, torch {meta['torch_version']}): parameters and batch are gpt.py's; "
          f"logits, loss and gradients not recomputed (needs {device} and that torch), "
          f"within 8u/40u of golden_gpt's float32 run")


def main():
    torch.set_num_threads(1)
    ap = argparse.ArgumentParser(description="Check the golden files and print a summary.")
    ap.add_argument("-q", "--quiet", action="store_true", help="no per-tensor listing")
    ap.add_argument("files", nargs="*", default=FILES, help="files to check, relative to the repository root")
    a = ap.parse_args()
    failed = []
    for rel in a.files:
        path = os.path.join(ROOT, rel)
        tensors, meta, hlen = readback.load(path)
        size = os.path.getsize(path)
        assert size < 1 << 20, f"{rel}: {size} bytes, over 1 MiB"
        assert meta.get("torch_version"), f"{rel}: no torch_version in metadata"
        dts = sorted({readback._NP_NAME[a.dtype.str] for a in tensors.values()})
        print(f"{rel}: {size} bytes, header {hlen} bytes, {len(tensors)} tensors, dtypes {dts}, "
              f"torch {meta['torch_version']}")
        if not a.quiet:
            summary(tensors)
        base = os.path.basename(rel)
        check = (check_ops if base.startswith("golden_ops") else check_layers if base.startswith("golden_layers")
                 else check_amp if base.startswith("golden_gpt_amp") else check_gpt)
        try:
            check(tensors, meta)
        except AssertionError:
            traceback.print_exc(limit=0)
            failed.append(rel)
    if failed:
        sys.exit(f"verify: FAILED: {', '.join(failed)}")
    print(f"verify: {len(a.files)} files ok")


if __name__ == "__main__":
    main()
