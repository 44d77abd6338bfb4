package tensor

import "fmt"

// Products with an epilogue: a bias added to the product, or the row sums
// of the first operand (a linear layer's bias gradient) computed with it.
// On a GPU they run in the GEMM's epilogue (cuBLASLt), so the bias add is
// not one more pass over the result and the bias gradient not one more
// reduction over the output gradient; where the epilogue is not available
// (the CPU, a GPU without cuBLASLt, a problem cuBLASLt has no kernel for)
// the same values come from the product and a separate op.

// epilogue is what a backend's matmulEpilogue adds to the product.
type epilogue int

const (
	epiBias     epilogue = iota // vec (n) added to every row of the result
	epiRowSumsA                 // vec (m) = the row sums of op(a) over k
)

// MatMulBias returns a @ b + bias for 2-D a (m, k) and b (k, n)
// (transposed views are used in place) and bias (n), added to every row,
// computed as mode says. The bias is taken in the result's dtype (cast
// when it differs). The values are MatMulWith's plus the bias, rounded
// once to the result's dtype: for a float32 result (float32 operands, or
// half ones under Float32Out) exactly MatMulWith then Add.
func MatMulBias(a, b, bias *Tensor, mode MatMulMode) *Tensor {
	const op = "MatMulBias"
	m, n, k, outDT := epilogueShapes(op, a, b, mode)
	sameDevice(op, a, bias)
	if bias.Rank() != 1 || bias.shape[0] != n {
		fail(op, ErrShape, "bias %v for a product of %d columns: want (%d)", bias.shape, n, n)
	}
	vec, done := epilogueVector(bias, outDT)
	defer done()
	out := mustNew(op, ctxOf(op, a, b), a.dev, outDT, []int{m, n})
	defer releaseOnPanic(out) // an operand that cannot be copied (out of memory)
	if out.Numel() > 0 && k > 0 && runEpilogue(out, a, b, vec, m, n, k, epiBias, mode) {
		return out
	}
	out.Release()
	if outDT.IsHalf() { // the float32 product plus the (half) bias, rounded once
		wide := mode
		wide.Float32Out = true
		p := MatMulWith(a, b, 1, wide)
		defer p.Release()
		v := vec.To(Float32)
		defer v.Release()
		s := Add(p, v)
		defer s.Release()
		return s.To(outDT)
	}
	p := MatMulWith(a, b, 1, mode)
	defer p.Release()
	return Add(p, vec)
}

// MatMulRowSums returns a @ b (2-D, as MatMulBias) and the sums of a's
// rows over k: m values in float32 for half a, else in a's dtype. When a
// is the transposed output gradient of a linear layer (gᵀ, the product its
// weight gradient gᵀ x), the sums are its bias gradient, and the GPU gets
// them from the product's epilogue, which reads a anyway.
func MatMulRowSums(a, b *Tensor, mode MatMulMode) (c, sums *Tensor) {
	const op = "MatMulRowSums"
	m, n, k, outDT := epilogueShapes(op, a, b, mode)
	sumDT := a.dtype
	if sumDT.IsHalf() {
		sumDT = Float32
	}
	c = mustNew(op, ctxOf(op, a, b), a.dev, outDT, []int{m, n})
	defer releaseOnPanic(c) // when sums cannot be allocated or the GEMM fails
	sums = mustNew(op, ctxOf(op, a, b), a.dev, sumDT, []int{m})
	defer releaseOnPanic(sums)
	if c.Numel() > 0 && k > 0 && sumDT == outDT && runEpilogue(c, a, b, sums, m, n, k, epiRowSumsA, mode) {
		return c, sums
	}
	c.Release()
	sums.Release()
	c = MatMulWith(a, b, 1, mode)
	defer releaseOnPanic(c) // when the sums fail
	wide := a
	if a.dtype != sumDT {
		wide = a.To(sumDT)
		defer wide.Release()
	}
	return c, Sum(wide, false, 1)
}

// epilogueShapes checks the operands of a 2-D product with an epilogue
// and returns its sizes and result dtype.
func epilogueShapes(op string, a, b *Tensor, mode MatMulMode) (m, n, k int, outDT DType) {
	sameDevice(op, a, b)
	sameFloat(op, a, b)
	if a.Rank() != 2 || b.Rank() != 2 || a.shape[1] != b.shape[0] {
		fail(op, ErrShape, "%v @ %v: want (m, k) @ (k, n)", a.shape, b.shape)
	}
	outDT = a.dtype
	if mode.Float32Out && a.dtype.IsHalf() {
		outDT = Float32
	}
	return a.shape[0], b.shape[1], a.shape[1], outDT
}

// epilogueVector returns v contiguous in dtype dt, and what releases it.
func epilogueVector(v *Tensor, dt DType) (*Tensor, func()) {
	if v.dtype == dt && v.IsContiguous() {
		return v, func() {}
	}
	c := v.To(dt)
	if !c.IsContiguous() {
		d := c.Contiguous()
		c.Release()
		c = d
	}
	return c, c.Release
}

// runEpilogue asks the backend for the fused product; false when it has
// none for these operands (then the caller composes the ops).
func runEpilogue(out, a, b, vec *Tensor, m, n, k int, epi epilogue, mode MatMulMode) bool {
	oa := operand(a, nil, 1, m*k)
	defer oa.temp.Release() // also when b's copy fails
	ob := operand(b, nil, 1, k*n)
	defer ob.temp.Release()
	return a.dev.backend().matmulEpilogue(out, oa.base, ob.base, vec, oa.trans, ob.trans, m, n, k, epi, mode.TF32)
}

func (e epilogue) String() string {
	switch e {
	case epiBias:
		return "bias"
	case epiRowSumsA:
		return "row sums of a"
	}
	return fmt.Sprintf("epilogue(%d)", int(e))
}
