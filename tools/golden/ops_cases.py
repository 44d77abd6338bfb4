"""The table of differentiable op cases for ops.py.

Each Case has a name, a JSON-able description of the op and its parameters,
make(gen) returning the inputs (floating inputs are float64 and get
gradients; int64 inputs are index data, stored as I32), and fn(inputs)
computing the output with PyTorch.  Inputs are named x (first operand),
w (second operand or weight), b (bias), ids, targets, mask.
"""

from collections import namedtuple

import torch
import torch.nn.functional as F

Case = namedtuple("Case", "name meta make fn")

F64 = torch.float64


def randn(g, *shape):
    return torch.randn(shape, generator=g, dtype=F64)


def away_from_zero(g, *shape):
    """Random values with |v| >= 0.5 (safe divisors)."""
    n = randn(g, *shape)
    return torch.where(n < 0, n - 0.5, n + 0.5)


def positive(g, *shape):
    """Random values in [0.1, 2.1) (safe log inputs)."""
    return torch.rand(shape, generator=g, dtype=F64) * 2 + 0.1


def causal_mask(*lead, t):
    """int64 mask, 1 where key j > query i (the positions set to -inf)."""
    m = torch.triu(torch.ones(t, t, dtype=torch.int64), diagonal=1)
    return m.expand(*lead, t, t).contiguous()


def binary(op, fn, xs, ws, pos_w=False):
    return lambda name: Case(
        name, {"op": op, "x_shape": list(xs), "w_shape": list(ws), "broadcast": list(xs) != list(ws)},
        lambda g: {"x": randn(g, *xs), "w": (away_from_zero if pos_w else randn)(g, *ws)},
        lambda i: fn(i["x"], i["w"]))


def unary(meta, fn, shape=(3, 5, 7), make=randn):
    return lambda name: Case(name, meta, lambda g: {"x": make(g, *shape)}, lambda i: fn(i["x"]))


def embedding_ids(g):
    # Ids drawn from 0..7 of a 10-row table: rows 8 and 9 get zero gradient;
    # a few ids are forced to repeat so gradient accumulation is exercised.
    ids = torch.randint(0, 8, (3, 4), generator=g, dtype=torch.int64)
    ids[1, 1] = ids[0, 0]
    ids[2, 3] = ids[0, 0]
    ids[2, 0] = ids[1, 2]
    return ids


def ce_targets(g, n, classes, ignore=()):
    t = torch.randint(0, classes, (n,), generator=g, dtype=torch.int64)
    for i in ignore:
        t[i] = -100
    return t


def _cases():
    yield binary("add", torch.add, (3, 1, 7), (5, 1))("add")
    yield binary("sub", torch.sub, (3, 1, 7), (5, 1))("sub")
    yield binary("mul", torch.mul, (3, 1, 7), (5, 1))("mul")
    yield binary("div", torch.div, (3, 1, 7), (5, 1), pos_w=True)("div")
    yield binary("add", torch.add, (3, 5, 7), (3, 5, 7))("add_same")
    yield binary("mul", torch.mul, (3, 5, 7), (7,))("mul_row")
    yield binary("div", torch.div, (3, 5, 7), (3, 5, 7), pos_w=True)("div_same")

    yield binary("matmul", torch.matmul, (3, 5), (5, 4))("matmul")
    yield binary("matmul", torch.matmul, (2, 3, 4, 5), (2, 3, 5, 6))("matmul_batched")
    yield binary("matmul", torch.matmul, (2, 3, 4, 5), (5, 6))("matmul_bcast")
    yield Case("matmul_tw", {"op": "matmul", "expr": "x @ w.T", "transpose_w": True},
               lambda g: {"x": randn(g, 4, 5), "w": randn(g, 6, 5)},
               lambda i: i["x"] @ i["w"].t())
    yield Case("matmul_tx", {"op": "matmul", "expr": "x.T @ w", "transpose_x": True},
               lambda g: {"x": randn(g, 5, 4), "w": randn(g, 5, 6)},
               lambda i: i["x"].t() @ i["w"])
    yield Case("matmul_batched_tw", {"op": "matmul", "expr": "x @ w.transpose(-2,-1)", "transpose_w": True},
               lambda g: {"x": randn(g, 2, 3, 4, 5), "w": randn(g, 2, 3, 6, 5)},
               lambda i: i["x"] @ i["w"].transpose(-2, -1))

    yield unary({"op": "sum", "dim": [1], "keepdim": True}, lambda x: x.sum(1, keepdim=True))("sum_keepdim")
    yield unary({"op": "sum", "dim": [1], "keepdim": False}, lambda x: x.sum(1))("sum")
    yield unary({"op": "sum", "dim": None, "keepdim": False}, lambda x: x.sum())("sum_all")
    yield unary({"op": "mean", "dim": [0, 2], "keepdim": False}, lambda x: x.mean((0, 2)))("mean")
    yield unary({"op": "mean", "dim": [1, 2], "keepdim": True},
                lambda x: x.mean((1, 2), keepdim=True))("mean_keepdim")

    yield unary({"op": "exp"}, torch.exp)("exp")
    yield unary({"op": "log", "domain": "[0.1, 2.1)"}, torch.log, make=positive)("log")
    yield unary({"op": "tanh"}, torch.tanh)("tanh")
    yield unary({"op": "gelu", "approximate": "tanh"}, lambda x: F.gelu(x, approximate="tanh"))("gelu")
    yield unary({"op": "silu", "domain": "4 * randn: both tails"}, F.silu,
                make=lambda g, *shape: 4 * randn(g, *shape))("silu")
    yield unary({"op": "softmax", "dim": -1}, lambda x: F.softmax(x, dim=-1))("softmax")
    yield unary({"op": "log_softmax", "dim": -1}, lambda x: F.log_softmax(x, dim=-1))("log_softmax")
    yield unary({"op": "scale", "factor": 0.125}, lambda x: x * 0.125)("scale")

    yield Case("layer_norm", {"op": "layer_norm", "normalized_shape": [7], "eps": 1e-5},
               lambda g: {"x": randn(g, 3, 5, 7), "w": 1 + 0.5 * randn(g, 7), "b": randn(g, 7)},
               lambda i: F.layer_norm(i["x"], (7,), i["w"], i["b"], 1e-5))

    yield Case("embedding", {"op": "embedding", "num_embeddings": 10, "dim": 6,
                             "note": "rows 8,9 unused (zero grad); ids repeat"},
               lambda g: {"ids": embedding_ids(g), "w": randn(g, 10, 6)},
               lambda i: F.embedding(i["ids"], i["w"]))

    yield Case("cross_entropy", {"op": "cross_entropy", "reduction": "mean"},
               lambda g: {"x": randn(g, 6, 11), "targets": ce_targets(g, 6, 11)},
               lambda i: F.cross_entropy(i["x"], i["targets"]))
    yield Case("cross_entropy_ignore", {"op": "cross_entropy", "reduction": "mean", "ignore_index": -100,
                                        "note": "targets[1], targets[4] ignored; mean over the other 4"},
               lambda g: {"x": randn(g, 6, 11), "targets": ce_targets(g, 6, 11, ignore=(1, 4))},
               lambda i: F.cross_entropy(i["x"], i["targets"], ignore_index=-100))

    yield Case("masked_fill", {"op": "masked_fill", "value": "-inf", "mask": "causal: 1 where j > i"},
               lambda g: {"x": randn(g, 2, 3, 5, 5), "mask": causal_mask(2, 3, t=5)},
               lambda i: i["x"].masked_fill(i["mask"] != 0, float("-inf")))
    yield Case("causal_softmax", {"op": "causal_softmax", "expr": "softmax(masked_fill(x, mask, -inf), -1)",
                                  "mask": "causal: 1 where j > i"},
               lambda g: {"x": randn(g, 2, 3, 5, 5), "mask": causal_mask(2, 3, t=5)},
               lambda i: F.softmax(i["x"].masked_fill(i["mask"] != 0, float("-inf")), dim=-1))

    yield unary({"op": "transpose", "dims": [1, 2], "contiguous": True},
                lambda x: x.transpose(1, 2).contiguous(), shape=(2, 5, 3, 4))("transpose")
    yield unary({"op": "transpose", "dims": [-2, -1], "contiguous": True},
                lambda x: x.transpose(-2, -1).contiguous())("transpose_last")
    yield unary({"op": "reshape", "shape": [15, 7]}, lambda x: x.reshape(15, 7))("reshape")
    yield unary({"op": "reshape", "shape": [2, 5, 2, 3]},
                lambda x: x.reshape(2, 5, 2, 3), shape=(2, 5, 6))("reshape_split")


CASES = list(_cases())
