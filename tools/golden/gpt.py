"""Generate nn/testdata/golden_gpt.safetensors (F32) and golden_gpt64.safetensors (F64).

One model is initialised GPT-2 style in float32 (seed 1337), then every
bias and every LayerNorm weight/bias gets normal(0, 0.02) noise so none of
them is trivially 0 or 1.  The float64 file uses the same float32 values
converted with model.double().  For each dtype the script stores:

    <param name>             every parameter, nanoGPT state_dict names
                             (lm_head.weight is tied to transformer.wte.weight
                             and not stored)
    idx, targets             I32 (B, T) token ids and next-token targets
    logits (B, T, V), loss []  forward pass
    grad.<param name>        gradients after loss.backward(); the tied
                             wte gradient holds both embedding and lm_head terms
    loss_after_step []       loss after one AdamW step (nanoGPT grouping)
    step1.<param name>       a few parameters after that step

Run: /usr/bin/python3 tools/golden/gpt.py [-o output directory]
"""

import argparse
import copy
import dataclasses
import json
import os

import torch
import torch.nn as nn

import nanogpt
import readback
import safetensors_io

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_DIR = os.path.join(HERE, "..", "..", "nn", "testdata")

CFG = nanogpt.Config(vocab_size=32, block_size=16, n_layer=2, n_head=2, n_embd=32, bias=True)
BATCH, SEQ = 3, 12
SEED = 1337
OPTIM = {"lr": 1e-3, "betas": (0.9, 0.95), "eps": 1e-8, "weight_decay": 0.1}
STEP1 = ["transformer.h.0.attn.c_attn.weight", "transformer.wte.weight",
         "transformer.h.0.ln_1.weight", "transformer.h.1.mlp.c_fc.bias"]


def base_model():
    torch.manual_seed(SEED)
    model = nanogpt.GPT(CFG)
    g = torch.Generator().manual_seed(SEED + 1)
    with torch.no_grad():
        for m in model.modules():
            noisy = [m.weight, m.bias] if isinstance(m, nn.LayerNorm) else [m.bias] if isinstance(m, nn.Linear) else []
            for p in noisy:
                if p is not None:
                    p.add_(torch.randn(p.shape, generator=g) * 0.02)
    return model


def batch():
    g = torch.Generator().manual_seed(SEED + 2)
    data = torch.randint(0, CFG.vocab_size, (BATCH, SEQ + 1), generator=g)
    return data[:, :-1].contiguous(), data[:, 1:].contiguous()


def run(model, idx, targets):
    out = {}
    names = [n for n, _ in model.named_parameters()]
    assert "lm_head.weight" not in names and model.lm_head.weight is model.transformer.wte.weight
    for n, p in model.named_parameters():
        out[n] = p.detach().clone()
    out["idx"], out["targets"] = idx.to(torch.int32), targets.to(torch.int32)
    logits, loss = model(idx, targets)
    loss.backward()
    out["logits"], out["loss"] = logits.detach(), loss.detach().reshape(())
    for n, p in model.named_parameters():
        out["grad." + n] = p.grad.detach().clone()
    opt = model.configure_optimizer(OPTIM["weight_decay"], OPTIM["lr"], OPTIM["betas"], OPTIM["eps"])
    opt.step()
    with torch.no_grad():
        _, loss2 = model(idx, targets)
    out["loss_after_step"] = loss2.detach().reshape(())
    params = dict(model.named_parameters())
    for n in STEP1:
        out["step1." + n] = params[n].detach().clone()
    return names, out


def metadata(names, dtype):
    cfg = dataclasses.asdict(CFG)
    cfg.update({"dropout": 0.0, "batch": BATCH, "seq_len": SEQ, "gelu": "tanh", "ln_eps": 1e-5,
                "tied_lm_head": True, "seed": SEED,
                "init": "normal(0,0.02) Linear/Embedding weights, c_proj.weight std 0.02/sqrt(2*n_layer), "
                        "zero biases, LN weight 1; then +normal(0,0.02) on every bias and LN weight/bias",
                "linear_layout": "weight (out, in); y = x @ weight.T + bias"})
    opt = {**OPTIM, "betas": list(OPTIM["betas"]), "decay": "params with dim >= 2", "no_decay": "dim < 2",
           "amsgrad": False, "steps": 1}
    return {"config": json.dumps(cfg, sort_keys=True), "optimizer": json.dumps(opt, sort_keys=True),
            "params": json.dumps(names), "step1": json.dumps(STEP1), "dtype": dtype,
            "torch_version": torch.__version__, "generator": "tools/golden/gpt.py"}


def main():
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    ap = argparse.ArgumentParser(description="Write the PyTorch golden values for the GPT model.")
    ap.add_argument("-o", "--outdir", default=os.path.normpath(DEFAULT_DIR), help="output directory")
    outdir = ap.parse_args().outdir
    if not os.path.isdir(outdir):
        raise SystemExit(f"gpt.py: output directory {outdir} does not exist")
    base = base_model()
    idx, targets = batch()
    for fname, dtype, code in (("golden_gpt.safetensors", torch.float32, "F32"),
                               ("golden_gpt64.safetensors", torch.float64, "F64")):
        model = copy.deepcopy(base).to(dtype)
        names, tensors = run(model, idx, targets)
        meta = metadata(names, code)
        path = os.path.join(outdir, fname)
        size = safetensors_io.save(path, tensors, meta)
        readback.check_roundtrip(path, tensors, meta)
        print(f"wrote {path}: {len(tensors)} tensors, {size} bytes, loss {tensors['loss'].item():.10f} "
              f"-> {tensors['loss_after_step'].item():.10f}")


if __name__ == "__main__":
    main()
