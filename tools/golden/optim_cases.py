"""Optimizer and gradient-clipping cases for ops.py (no autograd involved).

Each function takes a seeded torch.Generator and returns (meta, tensors)
where tensors maps short names (p0, g, p1, ...) to torch tensors.  The
optimizers run with foreach=False, PyTorch's plain per-parameter loop, so
the reference is the textbook update order.
"""

import torch

OPTIM_SHAPE = (5, 7)


def _code(dtype):
    return {torch.float32: "F32", torch.float64: "F64"}[dtype]


def _steps(opt_cls, dtype, g, kwargs, steps=3):
    p0 = torch.randn(OPTIM_SHAPE, generator=g, dtype=dtype)
    grad = torch.randn(OPTIM_SHAPE, generator=g, dtype=dtype)
    p = torch.nn.Parameter(p0.clone())
    opt = opt_cls([p], foreach=False, **kwargs)
    out = {"p0": p0, "g": grad}
    for k in range(1, steps + 1):
        p.grad = grad.clone()
        opt.step()
        out[f"p{k}"] = p.detach().clone()
    return opt.state[p], out


def adamw(g, dtype):
    kw = {"lr": 1e-3, "betas": (0.9, 0.95), "eps": 1e-8, "weight_decay": 0.1}
    state, out = _steps(torch.optim.AdamW, dtype, g, kw)
    out["m3"] = state["exp_avg"].clone()
    out["v3"] = state["exp_avg_sq"].clone()
    meta = {"op": "adamw", "lr": 1e-3, "betas": [0.9, 0.95], "eps": 1e-8, "weight_decay": 0.1,
            "amsgrad": False, "steps": 3, "same_grad_each_step": True,
            "update": "p*=1-lr*wd; m=b1*m+(1-b1)*g; v=b2*v+(1-b2)*g^2; "
                      "p-=lr/(1-b1^t)*m/(sqrt(v)/sqrt(1-b2^t)+eps)",
            "inputs": ["p0", "g"], "outputs": ["p1", "p2", "p3", "m3", "v3"],
            "notes": "m3, v3: exp_avg, exp_avg_sq after step 3", "dtype": _code(dtype)}
    return meta, out


def sgd(g, dtype, momentum=0.9, nesterov=False):
    kw = {"lr": 0.1, "momentum": momentum, "weight_decay": 0.01, "dampening": 0.0, "nesterov": nesterov}
    state, out = _steps(torch.optim.SGD, dtype, g, kw)
    outputs = ["p1", "p2", "p3"]
    if momentum:
        out["buf3"] = state["momentum_buffer"].clone()
        outputs.append("buf3")
    update = {(False, True): "d=g+wd*p; buf=d at step 1 else momentum*buf+d; p-=lr*buf",
              (True, True): "d=g+wd*p; buf=d at step 1 else momentum*buf+d; p-=lr*(d+momentum*buf)",
              (False, False): "d=g+wd*p; p-=lr*d"}[nesterov, bool(momentum)]
    meta = {"op": "sgd", **kw, "steps": 3, "same_grad_each_step": True, "update": update,
            "inputs": ["p0", "g"], "outputs": outputs, "dtype": _code(dtype)}
    if momentum:
        meta["notes"] = "buf3: momentum buffer after step 3"
    return meta, out


def clip(g, max_norm):
    g0 = torch.randn(3, 4, generator=g, dtype=torch.float64)
    g1 = torch.randn(5, generator=g, dtype=torch.float64)
    ps = [torch.nn.Parameter(torch.zeros_like(g0)), torch.nn.Parameter(torch.zeros_like(g1))]
    ps[0].grad, ps[1].grad = g0.clone(), g1.clone()
    total = torch.nn.utils.clip_grad_norm_(ps, max_norm=max_norm, norm_type=2.0)
    out = {"g0": g0, "g1": g1, "g0_after": ps[0].grad.clone(), "g1_after": ps[1].grad.clone(),
           "total_norm": total.detach().clone().reshape(())}
    meta = {"op": "clip_grad_norm", "max_norm": max_norm, "norm_type": 2,
            "update": "n=norm2([norm2(g0), norm2(g1)]); g*=min(1, max_norm/(n+1e-6))",
            "clipped": bool(total.item() > max_norm),
            "inputs": ["g0", "g1"], "outputs": ["g0_after", "g1_after", "total_norm"],
            "notes": "total_norm: the norm before clipping, as clip_grad_norm_ returns it", "dtype": "F64"}
    return meta, out


CASES = [
    ("adamw", lambda g: adamw(g, torch.float32)),
    ("adamw64", lambda g: adamw(g, torch.float64)),
    ("sgd", lambda g: sgd(g, torch.float32)),
    ("sgd64", lambda g: sgd(g, torch.float64)),
    ("clip", lambda g: clip(g, 1.0)),
    ("clip_noop", lambda g: clip(g, 100.0)),
    # PyTorch (and strata) reject nesterov=True with momentum 0: Nesterov
    # runs with momentum, and momentum 0 (no buffer) is a case of its own.
    ("sgd_nesterov", lambda g: sgd(g, torch.float32, nesterov=True)),
    ("sgd_nesterov64", lambda g: sgd(g, torch.float64, nesterov=True)),
    ("sgd_plain", lambda g: sgd(g, torch.float32, momentum=0.0)),
    ("sgd_plain64", lambda g: sgd(g, torch.float64, momentum=0.0)),
]
