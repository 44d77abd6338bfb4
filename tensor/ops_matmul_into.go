package tensor

// MatMulInto writes a @ b + beta·c into c, for 2-D a (m, k) and b (k, n)
// (transposed views are used in place) and c a contiguous (m, n) tensor
// of the product's dtype (float32 for half operands under Float32Out), as
// mode says: the GEMM's own accumulation (cuBLAS's and BLAS's beta), so a
// sum of products over chunks needs no separate add pass and no
// temporary, and a product lands in a slice of a larger tensor without a
// copy. beta 0 overwrites c without reading it (c may hold anything, NaN
// included); beta 1 accumulates. c must not be a view of a's or b's
// storage. Panics with ErrShape, ErrDType or ErrDevice on mismatches,
// ErrArgument on a c that is not contiguous or shares an operand's
// storage.
func MatMulInto(c, a, b *Tensor, beta float64, mode MatMulMode) {
	const op = "MatMulInto"
	c.live(op)
	a.live(op)
	b.live(op)
	m, n, k, outDT := epilogueShapes(op, a, b, mode)
	sameDevice(op, c, a)
	if c.Rank() != 2 || c.shape[0] != m || c.shape[1] != n {
		fail(op, ErrShape, "result %v for %v @ %v: want (%d, %d)", c.shape, a.shape, b.shape, m, n)
	}
	if c.dtype != outDT {
		fail(op, ErrDType, "result %v for a product of %v operands (Float32Out %v): want %v", c.dtype, a.dtype, mode.Float32Out, outDT)
	}
	if !c.IsContiguous() {
		fail(op, ErrArgument, "result %v is not contiguous", c.shape)
	}
	if c.SharesStorage(a) || c.SharesStorage(b) {
		fail(op, ErrArgument, "result %v shares storage with an operand", c.shape)
	}
	if m*n == 0 {
		return
	}
	modified(c)
	if k == 0 {
		if beta == 0 {
			c.Fill(0)
		} else if beta != 1 && c.dtype.IsHalf() {
			scaleHalf(c, beta) // in float32, rounded once, as the GEMM's beta*c
		} else if beta != 1 {
			c.ScaleInPlace(beta)
		}
		return
	}
	oa := operand(a, nil, 1, m*k)
	defer oa.temp.Release()
	ob := operand(b, nil, 1, k*n)
	defer ob.temp.Release()
	c.dev.backend().matmul(c, oa.base, ob.base, oa.trans, ob.trans, m, n, k, 1, oa.stride, ob.stride, 1, beta, mode.TF32)
}
