package tensor_test

import (
	"testing"

	"github.com/strata-ml/strata/tensor"
)

// testOpsCopiesAndViews: strided copies (transposes through the tiled
// kernel, permutes, narrowed and broadcast views), concatenation, fills.
func testOpsCopiesAndViews(t *testing.T) {
	runSuite(t, []opCase{
		{name: "Clone/transpose", exact: true, run: func(e *env) []*tensor.Tensor {
			x := e.randn(37, 45)
			b := e.randn(3, 40, 33)
			return []*tensor.Tensor{x.T().Clone(), b.T().Contiguous(), b.Transpose(0, 2).Clone()}
		}},
		{name: "Clone/permute", exact: true, run: func(e *env) []*tensor.Tensor {
			x := e.randn(2, 3, 4, 5)
			return []*tensor.Tensor{x.Permute(0, 2, 1, 3).Contiguous(), x.Permute(3, 1, 0, 2).Clone(), x.T().Reshape(-1)}
		}},
		{name: "Clone/narrow-expand", exact: true, run: func(e *env) []*tensor.Tensor {
			x := e.randn(6, 8)
			c := e.randn(3, 1)
			s := e.randn(5)
			return []*tensor.Tensor{
				x.Narrow(1, 2, 5).Clone(), x.Narrow(0, 1, 3).Clone(), c.Expand(3, 7).Clone(),
				s.Unsqueeze(0).Expand(4, 5).Clone(), x.Narrow(1, 3, 1).Squeeze(1).Clone(),
			}
		}},
		// Copies whose rows are contiguous runs of 16-byte multiples move
		// 16-byte words (the attention's head split and merge); others not.
		{name: "Clone/wide", exact: true, run: func(e *env) []*tensor.Tensor {
			x := e.randn(2, 5, 3, 64) // (B, T, H, hd)
			y := e.randn(2, 5, 3, 6)
			z := e.randn(4, 40)
			return []*tensor.Tensor{
				x.Permute(0, 2, 1, 3).Contiguous(), x.Transpose(1, 2).Clone(), x.Narrow(3, 8, 16).Clone(),
				x.Narrow(3, 1, 16).Clone(), y.Permute(0, 2, 1, 3).Contiguous(), z.Narrow(1, 8, 24).Clone(),
				z.Narrow(1, 4, 32).Clone(), z.Narrow(0, 1, 2).Narrow(1, 0, 16).Clone(),
			}
		}},
		{name: "Concat", exact: true, run: func(e *env) []*tensor.Tensor {
			a, b := e.randn(2, 3, 4), e.randn(2, 5, 4)
			c := e.randn(4, 3, 4)
			parts := c.Split(3, 0)
			return []*tensor.Tensor{tensor.Concat(1, a, b), tensor.Concat(0, a, c), tensor.Concat(0, parts...), tensor.Concat(2, a, a.Narrow(2, 1, 2))}
		}},
		{name: "Fill", exact: true, run: func(e *env) []*tensor.Tensor {
			x := e.randn(3, 5)
			x.Fill(-1.25)
			return []*tensor.Tensor{
				tensor.Full(e.dev, e.dt, 2.5, 3, 4), tensor.Zeros(e.dev, e.dt, 7), tensor.Ones(e.dev, e.dt, 2, 2),
				tensor.Scalar(e.dev, e.dt, -3), tensor.Arange(e.dev, e.dt, -2, 9), x,
				tensor.Full(e.dev, tensor.Float16, 1.0/3, 5), tensor.Full(e.dev, tensor.BFloat16, -7.1, 3),
				tensor.Full(e.dev, tensor.Int32, -42.9, 4), tensor.Arange(e.dev, tensor.Int32, 5, 6),
			}
		}},
	})
}

// unaryInput draws inputs inside each op's domain.
func unaryInput(e *env, op tensor.UnaryOp, shape ...int) *tensor.Tensor {
	switch op {
	case tensor.OpLog, tensor.OpSqrt, tensor.OpRsqrt:
		return e.uniform(0.1, 4, shape...)
	case tensor.OpRecip:
		return e.gen(func() float64 {
			v := 0.5 + 1.5*e.rng.Float64()
			if e.rng.IntN(2) == 0 {
				v = -v
			}
			return v
		}, shape)
	}
	return tensor.Scale(e.randn(shape...), 2)
}

// testOpsUnary: every unary function of the op table and its gradient,
// from the saved tensors each one needs. GELU's float32 error grows in the
// negative tail (see cpukern's doc), hence 2e-5.
func testOpsUnary(t *testing.T) {
	var cases []opCase
	for op := range tensor.NumUnaryOps {
		cases = append(cases, opCase{name: "Unary/" + op.String(), tol: 2e-5, run: func(e *env) []*tensor.Tensor {
			x := unaryInput(e, op, 3, 333)
			dy := e.randn(3, 333)
			y := tensor.Unary(op, x)
			usesX, usesY := op.BackwardUses()
			var sx, sy *tensor.Tensor
			if usesX {
				sx = x
			}
			if usesY {
				sy = y
			}
			if sx == nil && sy == nil {
				sx = x // UnaryBackward takes its device and dtype from x or y
			}
			// A transposed input exercises the contiguous copy first.
			return []*tensor.Tensor{y, tensor.UnaryBackward(op, sx, sy, dy), tensor.Unary(op, x.Reshape(333, 3).T())}
		}})
	}
	runSuite(t, cases)
}

// testOpsAffineAndBinary: affine maps, broadcasting binaries (bias adds,
// scalars, transposed operands), in-place updates. The IEEE operations
// round identically everywhere, so these are bit-exact; Pow goes through
// the math library and is compared with a tolerance.
func testOpsAffineAndBinary(t *testing.T) {
	cases := []opCase{
		{name: "Affine", exact: true, run: func(e *env) []*tensor.Tensor {
			x := e.randn(7, 13)
			y := x.Clone()
			y.ScaleInPlace(-0.3)
			return []*tensor.Tensor{tensor.Affine(x, -1.5, 0.25), tensor.Scale(x, 3), tensor.AddScalar(x, -2), tensor.Neg(x.T()), y}
		}},
	}
	for _, op := range []tensor.BinaryOp{tensor.OpAdd, tensor.OpSub, tensor.OpMul, tensor.OpDiv, tensor.OpMax, tensor.OpMin} {
		cases = append(cases, opCase{name: "Binary/" + op.String(), exact: true, run: func(e *env) []*tensor.Tensor {
			pos := func(shape ...int) *tensor.Tensor { return e.uniform(0.5, 2, shape...) }
			b := e.randn
			if op == tensor.OpDiv {
				b = pos
			}
			a1, b1 := e.randn(2, 3, 4), b(3, 1)
			a2, b2 := e.randn(4), b(2, 3, 4)
			a3, b3 := e.randn(2, 1, 4), b(3, 1)
			a4, b4 := e.randn(5, 6), b(5, 6)
			a5, b5 := e.randn(6, 5), b(6)
			a6, b6 := e.randn(3, 4), b()
			return []*tensor.Tensor{
				tensor.Binary(op, a1, b1), tensor.Binary(op, a2, b2), tensor.Binary(op, a3, b3),
				tensor.Binary(op, a4, b4), tensor.Binary(op, a5.T(), b5), tensor.Binary(op, a6, b6),
				tensor.Binary(op, b4.T(), a4.T()),
			}
		}})
	}
	cases = append(cases,
		opCase{name: "Binary/Pow", tol: 1e-6, run: func(e *env) []*tensor.Tensor {
			return []*tensor.Tensor{tensor.Binary(tensor.OpPow, e.uniform(0.5, 2, 4, 5), e.randn(5))}
		}},
		opCase{name: "AddInPlace", exact: true, run: func(e *env) []*tensor.Tensor {
			x, y := e.randn(9, 4), e.randn(4, 9)
			x.AddInPlace(y.T())
			return []*tensor.Tensor{x}
		}},
		// The contiguous element kernels move 16-byte packs when every
		// pointer is aligned and fall back element by element otherwise:
		// lengths with a tail, and views one element off (unaligned) or one
		// pack off (aligned), in every dtype.
		opCase{name: "Vectorised", exact: true, run: func(e *env) []*tensor.Tensor {
			x, y := e.randn(4101), e.randn(4101)
			var out []*tensor.Tensor
			for _, off := range []int{0, 1, 8} {
				a, b := x.Narrow(0, off, 4101-off), y.Narrow(0, off, 4101-off)
				z := a.Clone()
				z.AddInPlace(b)
				f := tensor.Zeros(e.dev, e.dt, 4101-off)
				f.Fill(0.375)
				out = append(out, tensor.Binary(tensor.OpMul, a, b), tensor.Binary(tensor.OpSub, b, a), z,
					tensor.Affine(a, -1.5, 0.25), tensor.Scale(b, 3), tensor.Neg(a), f,
					a.To(tensor.BFloat16).To(e.dt), a.To(tensor.Float16).To(e.dt), a.To(tensor.Float64).To(e.dt))
			}
			return out
		}},
		// Bias adds take the row-broadcast kernel (packs when cols allows);
		// the row may come first (Sub, Div: order matters).
		opCase{name: "RowBroadcast", exact: true, run: func(e *env) []*tensor.Tensor {
			var out []*tensor.Tensor
			for _, cols := range []int{64, 13, 8} {
				x, row := e.randn(37, cols), e.uniform(0.5, 2, cols)
				for _, op := range []tensor.BinaryOp{tensor.OpAdd, tensor.OpSub, tensor.OpMul, tensor.OpDiv, tensor.OpMax} {
					out = append(out, tensor.Binary(op, x, row), tensor.Binary(op, row, x),
						tensor.Binary(op, x.Narrow(0, 1, 36), row), tensor.Binary(op, x, row.Unsqueeze(0)))
				}
			}
			return out
		}},
		opCase{name: "VectorisedUnary", tol: 2e-5, run: func(e *env) []*tensor.Tensor {
			x := e.randn(4101)
			return []*tensor.Tensor{tensor.Unary(tensor.OpGelu, x), tensor.Unary(tensor.OpGelu, x.Narrow(0, 1, 4100)),
				tensor.Unary(tensor.OpExp, x.Narrow(0, 4, 4097))}
		}},
		opCase{name: "CausalMask", exact: true, run: func(e *env) []*tensor.Tensor {
			x, y := e.randn(2, 3, 5, 5), e.randn(2, 3, 7)
			return []*tensor.Tensor{tensor.CausalMask(x, tensor.NegInf), tensor.CausalMask(y, 0), tensor.CausalMask(x.T(), -1e4)}
		}},
		opCase{name: "Dropout", exact: true, run: func(e *env) []*tensor.Tensor {
			x := e.randn(1001)
			y := e.randn(7, 64)
			return []*tensor.Tensor{
				tensor.Dropout(x, 0.3, 42, 7), tensor.Dropout(x, 0.5, 1<<40+3, 0), tensor.Dropout(x, 0, 1, 2),
				tensor.Dropout(y, 0.1, 9, 1<<33+1), tensor.Dropout(x.Narrow(0, 3, 5), 0.9, 3, 2),
			}
		}},
	)
	runSuite(t, cases)
}
