package tensor

import (
	"math"
	"slices"
)

// matOperand describes one GEMM operand: its storage window, whether the
// last two axes are stored transposed, and the element stride between
// consecutive matrices of the batch (0 broadcasts one matrix).
type matOperand struct {
	base   *Tensor // descriptor: ref, offset, dtype, device; shape = [extent]
	trans  bool
	stride int
	temp   *Tensor // a contiguous copy made for the operand, to release
}

// layoutOf classifies t's last two axes: plain row-major, transposed
// row-major, or neither.
func layoutOf(t *Tensor) (ok, trans bool) {
	r := len(t.shape)
	rows, cols := t.shape[r-2], t.shape[r-1]
	rs, cs := t.strides[r-2], t.strides[r-1]
	if (cs == 1 || cols == 1) && (rs == cols || rows == 1) {
		return true, false
	}
	if (rs == 1 || rows == 1) && (cs == rows || cols == 1) {
		return true, true
	}
	return false, false
}

// batchStride returns the single stride that walks t's batch axes (viewed
// as batch shape bshape) in row-major order, if one exists.
func batchStride(t *Tensor, bshape []int) (int, bool) {
	st := broadcastStrides(&Tensor{shape: t.shape[:len(t.shape)-2], strides: t.strides[:len(t.strides)-2]}, bshape)
	s, n := -1, 1
	for i := len(bshape) - 1; i >= 0; i-- {
		if bshape[i] == 1 {
			continue
		}
		if s < 0 {
			s = st[i]
		} else if st[i] != s*n {
			return 0, false
		}
		n *= bshape[i]
	}
	if s < 0 {
		s = 0
	}
	return s, true
}

func operand(t *Tensor, bshape []int, batch, elems int) matOperand {
	ok, trans := layoutOf(t)
	var stride int
	if ok {
		stride, ok = batchStride(t, bshape)
	}
	var temp *Tensor
	if !ok {
		full := append(slices.Clone(bshape), t.shape[len(t.shape)-2:]...)
		v := t.Expand(full...)
		defer v.Release() // also when the copy fails (too many dims)
		temp = v.Clone()
		t, trans = temp, false
		stride = elems
		if batch == 1 {
			stride = 0
		}
	}
	extent := (batch-1)*stride + elems
	base := &Tensor{ref: t.ref, shape: []int{extent}, strides: []int{1}, offset: t.offset, dtype: t.dtype, dev: t.dev}
	return matOperand{base: base, trans: trans, stride: stride, temp: temp}
}

// MatMul returns a @ b for a (..., m, k) and b (..., k, n), broadcasting
// the batch axes; 1-D operands are not accepted (reshape them). Transposed
// views (t.T()) are used in place without a copy. Panics on mismatched
// shapes, dtypes or devices.
func MatMul(a, b *Tensor) *Tensor { return MatMulWith(a, b, 1, MatMulMode{}) }

// MatMulScaled returns alpha * (a @ b), the scale fused into the GEMM.
func MatMulScaled(a, b *Tensor, alpha float64) *Tensor { return MatMulWith(a, b, alpha, MatMulMode{}) }

// MatMulMode says how a product is computed and stored. The zero value
// is the plain product in the operands' dtype.
type MatMulMode struct {
	// Float32Out keeps the float32 accumulator's result of a product of
	// float16 or bfloat16 operands instead of rounding it to their dtype
	// (mixed precision: package amp's matrix products). Other operands
	// ignore it.
	Float32Out bool
	// TF32 lets float32 products use TF32 tensor cores (products of
	// 10-bit mantissas, float32 accumulation) on GPUs that have them, as
	// PyTorch's allow_tf32; it changes nothing on the CPU.
	TF32 bool
}

// MatMulWith returns alpha * (a @ b) computed as mode says (see MatMul for
// the shapes). Float16 and bfloat16 operands accumulate in float32 on
// every device.
func MatMulWith(a, b *Tensor, alpha float64, mode MatMulMode) *Tensor {
	sameDevice("MatMul", a, b)
	sameFloat("MatMul", a, b)
	outDT := a.dtype
	if mode.Float32Out && a.dtype.IsHalf() {
		outDT = Float32
	}
	if a.Rank() < 2 || b.Rank() < 2 {
		fail("MatMul", ErrShape, "operands %v and %v: want at least 2-D", a.shape, b.shape)
	}
	ra, rb := a.Rank(), b.Rank()
	m, k, k2, n := a.shape[ra-2], a.shape[ra-1], b.shape[rb-2], b.shape[rb-1]
	if k != k2 {
		fail("MatMul", ErrShape, "%v @ %v: inner dimensions %d and %d differ", a.shape, b.shape, k, k2)
	}
	bshape, problem := broadcast(a.shape[:ra-2], b.shape[:rb-2])
	if problem != "" {
		fail("MatMul", ErrShape, "batch axes of %v and %v: %s", a.shape, b.shape, problem)
	}
	out := mustNew("MatMul", ctxOf("MatMul", a, b), a.dev, outDT, append(slices.Clone(bshape), m, n))
	defer releaseOnPanic(out) // an operand that cannot be copied (operand)
	if out.Numel() == 0 {
		return out
	}
	batch := numel(bshape)
	// Fold the batch of a into its rows when b is one shared matrix and a
	// is plainly laid out: one large GEMM instead of many small ones, as
	// long as the rows stay within a GEMM's 32-bit sizes (cuBLAS refuses
	// m above MaxInt32, where the batch of smaller products runs).
	if rb == 2 && ra > 2 && a.IsContiguous() && m*batch <= math.MaxInt32 {
		m, batch, bshape = m*batch, 1, nil
	}
	if k == 0 {
		out.Fill(0)
		return out
	}
	oa := operand(a, bshape, batch, m*k)
	defer oa.temp.Release()
	ob := operand(b, bshape, batch, k*n)
	defer ob.temp.Release()
	a.dev.backend().matmul(out, oa.base, ob.base, oa.trans, ob.trans, m, n, k, batch, oa.stride, ob.stride, alpha, 0, mode.TF32)
	return out
}
