"""Read the golden files back with readback.py, check them, print a summary.

Checks, beyond the strict format checks of readback.load:
  * every file is under 1 MiB and records torch_version;
  * golden_ops: the tensors are exactly those the case metadata lists
    (inputs, outputs, dy, grads), each autograd case's y is recomputed from the stored
    inputs (bit-exact) and its stored gradients pass a finite-difference
    check against the stored dy; optimizer and clipping cases match the
    numpy reference of optim_ref.py;
  * golden_gpt*: the parameter set is exactly nanoGPT's, each parameter has
    a gradient of its shape, and loading the stored parameters into a fresh
    model reproduces the stored logits, loss and gradients.

Run: /usr/bin/python3 tools/golden/verify.py [-q]
"""

import argparse
import json
import os

import numpy as np
import torch

import nanogpt
import ops
import ops_cases
import optim_ref
import readback

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
FILES = ["tensor/testdata/golden_ops.safetensors", "nn/testdata/golden_gpt.safetensors",
         "nn/testdata/golden_gpt64.safetensors"]


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
    for name in cases:
        info = json.loads(meta[name])
        if name not in table:
            continue
        case = table[name]
        t = lambda k: torch.from_numpy(tensors[f"{name}.{k}"].copy()).to(
            torch.float64 if tensors[f"{name}.{k}"].dtype.kind == "f" else torch.int64)
        inputs = {k: t(k) for k in info["inputs"]}
        y = case.fn(inputs)
        assert y.numpy().tobytes() == tensors[f"{name}.y"].tobytes(), f"{name}: y does not recompute"
        grads = {g[1:]: t(g) for g in info["grads"]}
        ops.fd_check(case, inputs, grads, t("dy"))
    for name in cases:
        if name not in table:
            check_optim(name, json.loads(meta[name]), {k.split(".", 1)[1]: v for k, v in tensors.items()
                                                      if k.split(".", 1)[0] == name})
    print(f"  ops: {len(cases)} cases consistent ({len(table)} recomputed, gradients finite-difference checked)")


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


def main():
    torch.set_num_threads(1)
    ap = argparse.ArgumentParser(description="Check the golden files and print a summary.")
    ap.add_argument("-q", "--quiet", action="store_true", help="no per-tensor listing")
    quiet = ap.parse_args().quiet
    for rel in FILES:
        path = os.path.join(ROOT, rel)
        tensors, meta, hlen = readback.load(path)
        size = os.path.getsize(path)
        assert size < 1 << 20, f"{rel}: {size} bytes, over 1 MiB"
        assert meta.get("torch_version"), f"{rel}: no torch_version in metadata"
        dts = sorted({readback._NP_NAME[a.dtype.str] for a in tensors.values()})
        print(f"{rel}: {size} bytes, header {hlen} bytes, {len(tensors)} tensors, dtypes {dts}, "
              f"torch {meta['torch_version']}")
        if not quiet:
            summary(tensors)
        (check_ops if "ops" in rel else check_gpt)(tensors, meta)


if __name__ == "__main__":
    main()
