package tensor

import "math"

// fusedAttention is implemented by backends that run fused causal
// attention (FlashAttention-2): q, k, v are contiguous (bh, t, hd) in one
// float dtype; out, lse, dout, dq, dk and dv are contiguous in its
// accumulation dtype (float64 for float64, float32 otherwise), lse
// (bh, t). The CPU runs internal/cpukern/attention.go, the GPU
// kernels/attention.cuh.
type fusedAttention interface {
	attentionForward(out, lse, q, k, v *Tensor, bh, t, hd int, scale, p float64, seed, offset uint64)
	attentionBackward(dq, dk, dv, q, k, v, out, dout, lse *Tensor, bh, t, hd int, scale, p float64, seed, offset uint64)
}

// AccumDType is the dtype fused attention accumulates and returns in for
// inputs of dtype dt: float64 for float64, float32 for the others.
func AccumDType(dt DType) DType {
	if dt == Float64 {
		return Float64
	}
	return Float32
}

// FusedCausalAttention is causal self-attention over q, k, v of shape
// (..., T, hd), hd at least 1 (a zero head dimension is an *OpError
// wrapping ErrShape), in one pass that never holds the (..., T, T) scores:
//
//	out = dropout(softmax(mask(q kᵀ / √hd))) v
//
// computed tile by tile with the online softmax (FlashAttention-2). It
// also returns lse (..., T), the log-sum-exp of each row's scaled scores,
// which FusedCausalAttentionBackward needs to recompute the
// probabilities. q, k and v share one float dtype; float16 and bfloat16
// inputs are multiplied with float32 accumulation, and out and lse are
// float32 for them (float64 for float64 inputs, which only the CPU runs).
// Dropout (p > 0) zeroes probability (h, i, j) with the mask
// Dropout(att, p, seed, offset) would draw over the (..., T, T)
// probabilities, so the fused and plain paths drop the same elements.
// On CUDA hd is at most 128, and float16 and bfloat16 run on tensor
// cores, rounding the probabilities (and in backward the output gradient
// and ds) to their type before the products, as the plain path under
// autocast does; EnvAttention=simt runs them in float32 math instead.
// Results are deterministic on both devices (no atomics).
func FusedCausalAttention(q, k, v *Tensor, p float64, seed, offset uint64) (out, lse *Tensor) {
	const op = "FusedCausalAttention"
	bh, t, hd := attentionShape(op, q, k, v, p)
	fa := attentionBackend(op, q)
	cs, release := contigAll(q, k, v)
	defer release()
	c := ctxOf(op, q, k, v)
	acc := AccumDType(q.dtype)
	out = mustNew(op, c, q.dev, acc, q.shape)
	defer releaseOnPanic(out) // when lse or the kernel fails
	lse = mustNew(op, c, q.dev, acc, q.shape[:len(q.shape)-1])
	defer releaseOnPanic(lse)
	if out.Numel() > 0 {
		fa.attentionForward(out, lse, cs[0], cs[1], cs[2], bh, t, hd, 1/math.Sqrt(float64(hd)), p, seed, offset)
	}
	return out, lse
}

// FusedCausalAttentionBackward returns the gradients of q, k and v from
// the output gradient dout, given the forward's inputs and its outputs
// out and lse, with the forward's dropout (p, seed, offset). It
// recomputes the probabilities tile by tile and holds nothing of size
// (..., T, T). dout, out and lse are in the accumulation dtype of q (see
// FusedCausalAttention), and so are the gradients.
func FusedCausalAttentionBackward(q, k, v, out, lse, dout *Tensor, p float64, seed, offset uint64) (dq, dk, dv *Tensor) {
	const op = "FusedCausalAttentionBackward"
	bh, t, hd := attentionShape(op, q, k, v, p)
	sameDevice(op, q, out, lse, dout)
	acc := AccumDType(q.dtype)
	for _, x := range []*Tensor{out, dout} {
		if x.dtype != acc || !shapeEq(x.shape, q.shape) {
			fail(op, dtypeOrShape(x.dtype, acc), "out/dout %v %v for q %v %v: want %v %v", x.dtype, x.shape, q.dtype, q.shape, acc, q.shape)
		}
	}
	if lse.dtype != acc || !shapeEq(lse.shape, q.shape[:len(q.shape)-1]) {
		fail(op, dtypeOrShape(lse.dtype, acc), "lse %v %v for q %v", lse.dtype, lse.shape, q.shape)
	}
	fa := attentionBackend(op, q)
	cs, release := contigAll(q, k, v, out, lse, dout)
	defer release()
	c := ctxOf(op, q, k, v, out, lse, dout)
	dq = mustNew(op, c, q.dev, acc, q.shape)
	defer releaseOnPanic(dq) // when a later allocation or the kernels fail
	dk = mustNew(op, c, q.dev, acc, q.shape)
	defer releaseOnPanic(dk)
	dv = mustNew(op, c, q.dev, acc, q.shape)
	defer releaseOnPanic(dv)
	if dq.Numel() > 0 {
		fa.attentionBackward(dq, dk, dv, cs[0], cs[1], cs[2], cs[3], cs[5], cs[4], bh, t, hd, 1/math.Sqrt(float64(hd)), p, seed, offset)
	}
	return dq, dk, dv
}

// attentionShape checks q, k, v and p, refusing head dimension 0 (lse,
// the log-sum-exp over no scores, would be undefined), and returns the
// number of heads (the product of the leading dims), T and hd.
func attentionShape(op string, q, k, v *Tensor, p float64) (bh, t, hd int) {
	sameDevice(op, q, k, v)
	sameFloat(op, q, k, v)
	if q.Rank() < 2 || !shapeEq(q.shape, k.shape) || !shapeEq(q.shape, v.shape) {
		fail(op, ErrShape, "q %v, k %v, v %v: want one shape (..., T, hd)", q.shape, k.shape, v.shape)
	}
	if p < 0 || p >= 1 || math.IsNaN(p) {
		fail(op, ErrArgument, "dropout probability %v not in [0, 1)", p)
	}
	t, hd = q.shape[q.Rank()-2], q.shape[q.Rank()-1]
	if hd == 0 {
		fail(op, ErrShape, "q %v has head dimension 0: want (..., T, hd), hd >= 1", q.shape)
	}
	if t == 0 {
		return 0, t, hd
	}
	return q.Numel() / (t * hd), t, hd
}

// dtypeOrShape is the sentinel of an operand that is not of dtype want
// and the shape wanted: ErrDType when its dtype dt is not want, else
// ErrShape.
func dtypeOrShape(dt, want DType) error {
	if dt != want {
		return ErrDType
	}
	return ErrShape
}

func attentionBackend(op string, q *Tensor) fusedAttention {
	fa, ok := q.dev.backend().(fusedAttention)
	if !ok {
		fail(op, ErrDevice, "%v has no fused attention", q.dev)
	}
	return fa
}
