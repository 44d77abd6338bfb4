"""Plain numpy float64 reference of the optimizer and clipping formulas.

verify.py runs these on the stored inputs and compares with PyTorch's stored
outputs, which confirms both the files and the formulas written in their
metadata (the Go implementations follow those formulas).
"""

import numpy as np


def adamw(p, g, steps, lr, betas, eps, weight_decay, **_):
    b1, b2 = betas
    m, v, out = np.zeros_like(p), np.zeros_like(p), []
    for t in range(1, steps + 1):
        p = p * (1 - lr * weight_decay)
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        p = p - lr / (1 - b1 ** t) * m / (np.sqrt(v) / np.sqrt(1 - b2 ** t) + eps)
        out.append(p)
    return out, {"m3": m, "v3": v}


def sgd(p, g, steps, lr, momentum, weight_decay, nesterov=False, **_):
    buf, out = None, []
    for _ in range(steps):
        d = g + weight_decay * p
        if momentum:
            buf = d if buf is None else momentum * buf + d
            d = d + momentum * buf if nesterov else buf
        p = p - lr * d
        out.append(p)
    return out, ({"buf3": buf} if momentum else {})


def clip(grads, max_norm):
    n = np.sqrt(sum(float(np.sum(x * x)) for x in grads))
    coef = min(1.0, max_norm / (n + 1e-6))
    return [x * coef for x in grads], n
