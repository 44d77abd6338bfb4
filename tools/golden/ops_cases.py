"""The table of differentiable op cases for ops.py.

Each Case has a name, a JSON-able description of the op and its parameters,
make(gen) returning the inputs (floating inputs are float64, but for the
float32 of cast_bf16, and get gradients; int64 inputs are index data,
stored as I32), and fn(inputs)
computing the output with PyTorch.  Inputs are named x (first operand),
w (second operand or weight), b (bias or third operand), q, k, v
(attention), ids, targets, mask.  Two optional fields: grad=False makes a
forward-only case (strata has no gradient for the op: no dy, no grads
stored, metadata "forward_only": true); fd=False skips the
finite-difference check (a rounding op such as a cast, whose gradient
verify.py recomputes with autograd instead).
"""

import math
from collections import namedtuple

import numpy as np
import torch
import torch.nn.functional as F

Case = namedtuple("Case", "name meta make fn grad fd", defaults=(True, True))

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


def away(gap):
    """Random values with |v| >= gap (away from a kink at 0)."""
    def make(g, *shape):
        n = randn(g, *shape)
        return torch.where(n < 0, n - gap, n + gap)
    return make


def causal_mask(*lead, t, keys=None):
    """int64 mask, 1 where key j > query i + keys - t (the positions set to
    -inf): t query rows aligned to the last of keys (default t) columns, as
    strata's CausalSoftmax and CausalMask take them (a KV cache's queries)."""
    keys = t if keys is None else keys
    m = torch.triu(torch.ones(t, keys, dtype=torch.int64), diagonal=keys - t + 1)
    return m.expand(*lead, t, keys).contiguous()


def binary(op, fn, xs, ws, pos_w=False, make_x=randn, make_w=None, grad=True):
    make_w = make_w or (away_from_zero if pos_w else randn)
    return lambda name: Case(
        name, {"op": op, "x_shape": list(xs), "w_shape": list(ws), "broadcast": list(xs) != list(ws)},
        lambda g: {"x": make_x(g, *xs), "w": make_w(g, *ws)},
        lambda i: fn(i["x"], i["w"]), grad)


def unary(meta, fn, shape=(3, 5, 7), make=randn, grad=True):
    return lambda name: Case(name, meta, lambda g: {"x": make(g, *shape)}, lambda i: fn(i["x"]), grad)


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

    yield Case("layer_norm_empty", {"op": "layer_norm", "normalized_shape": [0], "eps": 1e-5,
                                    "note": "rows of 0 elements: an empty y and empty gradients"},
               lambda g: {"x": randn(g, 3, 0), "w": randn(g, 0), "b": randn(g, 0)},
               lambda i: F.layer_norm(i["x"], (0,), i["w"], i["b"], 1e-5))

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

    # Logits so large that m + log(sum exp(x - m)) rounds log s away (m the
    # row's max): the loss must be computed as (m - x[t]) + log s, and the
    # log-softmax as (x - m) - log s, as PyTorch does.
    yield Case("cross_entropy_extreme", {"op": "cross_entropy", "reduction": "mean",
                                         "note": "rows of 3e38, -3e38 and 1e16: (m - x[t]) + log s"},
               lambda g: {"x": torch.tensor([[3e38, 3e38, 0.0], [-3e38, -3e38, -3e38], [1e16, 1e16, 1e16],
                                             [1e20, 0.0, -1e20]], dtype=F64),
                          "targets": torch.tensor([0, 1, 2, 0])},
               lambda i: F.cross_entropy(i["x"], i["targets"]), fd=False)
    yield Case("log_softmax_extreme", {"op": "log_softmax", "dim": -1,
                                       "note": "rows of 3e38 and 1e16: (x - m) - log s"},
               lambda g: {"x": torch.tensor([[3e38, 3e38, 0.0], [1e16, 1e16, 1e16 + 2.0 ** 31],
                                             [-3e38, -3e38, -3e38]], dtype=F64)},
               lambda i: F.log_softmax(i["x"], dim=-1), fd=False)

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

    yield from _table_cases()
    yield from _nn_cases()
    yield from _view_cases()


def _table_cases():
    """The unary and binary ops of strata's op table (tensor/internal/ops),
    the max reduction and the scalar affine ops."""
    for op, fn, make in [("neg", torch.neg, randn), ("sqrt", torch.sqrt, positive),
                         ("rsqrt", torch.rsqrt, positive), ("abs", torch.abs, away(0.05)),
                         ("square", torch.square, randn), ("reciprocal", torch.reciprocal, away_from_zero),
                         ("sigmoid", torch.sigmoid, lambda g, *shape: 4 * randn(g, *shape)),
                         ("relu", F.relu, away(0.05))]:
        yield unary({"op": op}, fn, make=make)(op)

    # Forward only: strata's Binary Max/Min/Pow and the Max reduction have
    # no gradient.
    yield binary("maximum", torch.maximum, (3, 1, 7), (5, 1), grad=False)("maximum")
    yield binary("minimum", torch.minimum, (3, 5, 7), (3, 5, 7), grad=False)("minimum")
    yield binary("pow", torch.pow, (3, 5, 7), (3, 5, 7), make_x=positive, grad=False)("pow")
    yield binary("pow", torch.pow, (3, 5, 7), (7,), make_x=away_from_zero, grad=False,
                 make_w=lambda g, *s: torch.randint(-3, 4, s, generator=g).to(F64))("pow_int")
    yield unary({"op": "amax", "dim": [1], "keepdim": False}, lambda x: x.amax(1), grad=False)("amax")
    yield unary({"op": "amax", "dim": [0, 2], "keepdim": True},
                lambda x: x.amax((0, 2), keepdim=True), grad=False)("amax_keepdim")

    yield unary({"op": "affine", "alpha": -1.5, "beta": 0.75}, lambda x: x * -1.5 + 0.75)("affine")
    yield unary({"op": "add_scalar", "scalar": -0.375}, lambda x: x - 0.375, grad=False)("add_scalar")


def attention(q, k, v):
    """softmax(mask(q kᵀ / √hd)) v, written out (torch 1.13 has no SDPA)."""
    t, hd = q.shape[-2], q.shape[-1]
    att = (q @ k.transpose(-2, -1)) / math.sqrt(hd)
    att = att.masked_fill(causal_mask(t=t) != 0, float("-inf"))
    return F.softmax(att, dim=-1) @ v


def attention_qkv(x, heads):
    """attention over the heads of one (B, T, 3C) product, y (B, T, C)."""
    b, t, c3 = x.shape
    c = c3 // 3
    q, k, v = (a.reshape(b, t, heads, c // heads).transpose(1, 2) for a in x.split(c, dim=2))
    return attention(q, k, v).transpose(1, 2).reshape(b, t, c)


def _nn_cases():
    yield Case("layer_norm_noaffine", {"op": "layer_norm", "normalized_shape": [7], "eps": 1e-5,
                                       "affine": False, "note": "weight and bias None"},
               lambda g: {"x": randn(g, 3, 5, 7)},
               lambda i: F.layer_norm(i["x"], (7,), None, None, 1e-5))
    rect = "1 where j > i + 3 (4 query rows aligned to the last of 7 keys, as a KV cache)"
    yield Case("causal_softmax_rect", {"op": "causal_softmax", "mask": rect,
                                       "expr": "softmax(masked_fill(x, mask, -inf), -1)"},
               lambda g: {"x": randn(g, 2, 3, 4, 7), "mask": causal_mask(2, 3, t=4, keys=7)},
               lambda i: F.softmax(i["x"].masked_fill(i["mask"] != 0, float("-inf")), dim=-1))
    yield Case("masked_fill_rect", {"op": "masked_fill", "value": "-inf", "mask": rect},
               lambda g: {"x": randn(g, 2, 3, 4, 7), "mask": causal_mask(2, 3, t=4, keys=7)},
               lambda i: i["x"].masked_fill(i["mask"] != 0, float("-inf")))

    expr = "softmax(masked_fill(q k^T / sqrt(hd), causal, -inf), -1) v"
    for name, fused in (("causal_attention", False), ("fused_causal_attention", True)):
        yield Case(name, {"op": "causal_attention", "fused": fused, "dropout": 0.0, "expr": expr},
                   lambda g: {"q": randn(g, 2, 3, 6, 4), "k": randn(g, 2, 3, 6, 4), "v": randn(g, 2, 3, 6, 4)},
                   lambda i: attention(i["q"], i["k"], i["v"]))
    yield Case("fused_causal_attention_qkv", {"op": "causal_attention_qkv", "heads": 2, "dropout": 0.0,
                                              "expr": "x (B, T, 3C) split into q, k, v, heads of hd = C/heads; "
                                                      + expr + "; heads side by side (B, T, C)"},
               lambda g: {"x": randn(g, 2, 6, 24)}, lambda i: attention_qkv(i["x"], 2))

    yield Case("linear_cross_entropy", {"op": "linear_cross_entropy", "chunk_rows": 0, "reduction": "mean",
                                        "expr": "cross_entropy(linear(x, w), targets)"},
               lambda g: {"x": randn(g, 6, 5), "w": randn(g, 11, 5), "targets": ce_targets(g, 6, 11)},
               lambda i: F.cross_entropy(F.linear(i["x"], i["w"]), i["targets"]))
    yield Case("linear_cross_entropy_ignore",
               {"op": "linear_cross_entropy", "chunk_rows": 4, "reduction": "mean", "ignore_index": -100,
                "expr": "cross_entropy(linear(x.reshape(-1, 5), w), targets.reshape(-1))",
                "note": "rows in chunks of 4 (4 + 2); targets[0,2], targets[1,1] ignored"},
               lambda g: {"x": randn(g, 2, 3, 5), "w": randn(g, 11, 5),
                          "targets": ce_targets(g, 6, 11, ignore=(2, 4)).reshape(2, 3)},
               lambda i: F.cross_entropy(F.linear(i["x"].reshape(-1, 5), i["w"]), i["targets"].reshape(-1),
                                         ignore_index=-100))
    yield Case("cross_entropy_fused", {"op": "cross_entropy_fused", "classes": 11, "reduction": "none",
                                       "ignore_index": -100,
                                       "note": "x (6, 13): 11 classes and 2 padding columns (zero gradient); "
                                               "targets[2] ignored (loss 0); dx = d(sum(dy * y))/dx"},
               lambda g: {"x": randn(g, 6, 13), "targets": ce_targets(g, 6, 11, ignore=(2,))},
               lambda i: F.cross_entropy(i["x"][:, :11], i["targets"], reduction="none", ignore_index=-100))


# float32 bit patterns at bfloat16's rounding edges: ties to even (up and
# down), just above a tie, overflow to inf (the largest float32, and the
# tie above bfloat16's largest), the largest finite result, subnormals
# (rounded to 0, a tie, exact, up to the smallest normal), infinities, -0.
CAST_BITS = [0x3F808000, 0x3F818000, 0x3F808001, 0xBF808000, 0xBF818000, 0x7F7FFFFF, 0xFF7FFFFF,
             0x7F7F8000, 0x7F7F7FFF, 0x00000001, 0x00008000, 0x00018000, 0x00400000, 0x807FFFFF,
             0x7F800000, 0xFF800000, 0x80000000]


def cast_input(g):
    x = torch.randn(4, 8, generator=g, dtype=torch.float32)
    special = torch.from_numpy(np.array(CAST_BITS, dtype=np.uint32).view(np.float32))
    x.view(-1)[:len(special)] = special
    return x


def _view_cases():
    yield unary({"op": "permute", "dims": [2, 0, 3, 1]}, lambda x: x.permute(2, 0, 3, 1),
                shape=(2, 3, 4, 5))("permute")
    yield unary({"op": "narrow", "axis": 1, "start": 2, "length": 3}, lambda x: x.narrow(1, 2, 3),
                shape=(3, 7, 4))("narrow")
    yield unary({"op": "split", "size": 3, "axis": 1, "expr": "p0 * p1 + p2 of x.split(3, 1) (p2: 1 wide)"},
                lambda x: (lambda p: p[0] * p[1] + p[2])(x.split(3, 1)), shape=(3, 7, 4))("split")
    yield unary({"op": "expand", "shape": [2, 3, 5, 4]}, lambda x: x.expand(2, 3, 5, 4),
                shape=(3, 1, 4), grad=False)("expand")
    yield unary({"op": "squeeze", "axis": 1}, lambda x: x.squeeze(1), shape=(3, 1, 4), grad=False)("squeeze")
    yield unary({"op": "unsqueeze", "axis": 1}, lambda x: x.unsqueeze(1), shape=(3, 4), grad=False)("unsqueeze")
    yield Case("concat", {"op": "concat", "axis": 1}, lambda g: {"x": randn(g, 3, 2, 4), "w": randn(g, 3, 5, 4),
                                                                 "b": randn(g, 3, 1, 4)},
               lambda i: torch.cat([i["x"], i["w"], i["b"]], 1), grad=False)
    yield Case("cast_bf16", {"op": "cast_bf16", "exact": True,
                             "expr": "x.to(bfloat16).to(float32); dx = dy.to(bfloat16).to(float32)",
                             "note": "x[0:17] are CAST_BITS of ops_cases.py (ties, overflow, subnormals, inf)"},
               lambda g: {"x": cast_input(g)}, lambda i: i["x"].to(torch.bfloat16).to(torch.float32), fd=False)


CASES = list(_cases())
