package tensor_test

import (
	"testing"

	"github.com/strata-ml/strata/tensor"
)

// testOpsReductions: sums and maxima over every axis pattern, including
// the chunked two-pass paths (long rows, long columns, full sums) and the
// sum of squares. Sums accumulate in float64 on every device, so float32
// results are the float64 sums rounded once.
func testOpsReductions(t *testing.T) {
	runSuite(t, []opCase{
		{name: "Sum/axes", tol: 1e-6, run: func(e *env) []*tensor.Tensor {
			x := e.randn(4, 5, 6)
			return []*tensor.Tensor{
				tensor.Sum(x, false, 0), tensor.Sum(x, true, 1), tensor.Sum(x, false, 2), tensor.Sum(x, false, 0, 2),
				tensor.Sum(x, false), tensor.Mean(x, false, 2), tensor.Mean(x, true), tensor.Sum(x.Permute(2, 0, 1), false, 1),
				tensor.SumTo(x, []int{5, 1}), tensor.SumTo(x, []int{4, 1, 6}),
			}
		}},
		{name: "Max/axes", exact: true, run: func(e *env) []*tensor.Tensor {
			x := e.randn(4, 5, 6)
			return []*tensor.Tensor{tensor.Max(x, false, 0), tensor.Max(x, true, 1), tensor.Max(x, false, 2), tensor.Max(x, false)}
		}},
		{name: "Sum/long-rows", tol: 1e-6, run: func(e *env) []*tensor.Tensor {
			x := e.randn(3, 70001)
			return []*tensor.Tensor{tensor.Sum(x, false, 1), tensor.Max(x, false, 1)}
		}},
		{name: "Sum/long-columns", tol: 1e-6, run: func(e *env) []*tensor.Tensor {
			x := e.randn(5000, 97)
			return []*tensor.Tensor{tensor.Sum(x, false, 0), tensor.Max(x, true, 0), tensor.Mean(x, false, 0)}
		}},
		{name: "Sum/all-large", tol: 1e-6, run: func(e *env) []*tensor.Tensor {
			x := e.randn(300007)
			return []*tensor.Tensor{tensor.Sum(x, false), tensor.Max(x, false)}
		}},
		{name: "SumSquares", tol: 1e-6, run: func(e *env) []*tensor.Tensor {
			small, large := e.randn(1000), e.randn(3, 100003)
			return []*tensor.Tensor{
				tensor.Scalar(tensor.CPU(), tensor.Float64, tensor.SumSquares(small)),
				tensor.Scalar(tensor.CPU(), tensor.Float64, tensor.SumSquares(large)),
				tensor.Scalar(tensor.CPU(), tensor.Float64, tensor.SumSquares(large.T())),
				// Many tensors, one reduction: equal to the sum of the parts.
				tensor.Scalar(tensor.CPU(), tensor.Float64, tensor.SumSquaresAll([]*tensor.Tensor{small, large, large.T(), e.randn(0), e.randn(7)})),
				tensor.Scalar(tensor.CPU(), tensor.Float64, tensor.SumSquaresAll(nil)),
			}
		}},
	})
}

// testOpsMatMul: plain, transposed-view and batched layouts (broadcast
// batch axes, a batch folded into rows), and a scaled product. cuBLAS
// sums in float32 in its own order, so float32 errors are bounded against
// the output's scale.
func testOpsMatMul(t *testing.T) {
	runSuite(t, []opCase{
		{name: "MatMul/2d", tol: 1e-5, floor: 1, run: func(e *env) []*tensor.Tensor {
			return []*tensor.Tensor{tensor.MatMul(e.randn(33, 47), e.randn(47, 29))}
		}},
		{name: "MatMul/transposed", tol: 1e-5, floor: 1, run: func(e *env) []*tensor.Tensor {
			a, b := e.randn(2, 4, 3), e.randn(2, 5, 4)
			c, d := e.randn(20, 30), e.randn(40, 30)
			return []*tensor.Tensor{tensor.MatMul(a.T(), b.Transpose(1, 2)), tensor.MatMul(c, d.T()), tensor.MatMul(c.T(), c)}
		}},
		{name: "MatMul/batched", tol: 1e-5, floor: 1, run: func(e *env) []*tensor.Tensor {
			a, b := e.randn(1, 3, 4), e.randn(2, 4, 5)
			c, w := e.randn(2, 3, 4), e.randn(4, 2)
			p, q := e.randn(2, 2, 3, 4), e.randn(2, 1, 4, 5)
			return []*tensor.Tensor{tensor.MatMul(a, b), tensor.MatMul(c, w), tensor.MatMul(p, q), tensor.MatMul(w.T(), c.T())}
		}},
		{name: "MatMul/scaled", tol: 1e-5, floor: 1, run: func(e *env) []*tensor.Tensor {
			return []*tensor.Tensor{tensor.MatMulScaled(e.randn(4, 64, 96), e.randn(4, 96, 80), 0.125)}
		}},
		{name: "MatMul/epilogues", tol: 1e-5, floor: 1, run: func(e *env) []*tensor.Tensor {
			// A linear layer's forward (x wᵀ + b) and its weight and bias
			// gradients (gᵀ x, Σ rows of gᵀ), against the composed ops.
			x, w, b, g := e.randn(37, 64), e.randn(48, 64), e.randn(48), e.randn(37, 48)
			y := tensor.MatMulBias(x, w.T(), b, tensor.MatMulMode{})
			gw, gb := tensor.MatMulRowSums(g.T(), x, tensor.MatMulMode{})
			y2 := tensor.MatMulBias(g, w, e.randn(64), tensor.MatMulMode{}) // untransposed operands
			c, s := tensor.MatMulRowSums(x, w.T(), tensor.MatMulMode{})
			return []*tensor.Tensor{y, tensor.Add(tensor.MatMul(x, w.T()), b), gw, gb, tensor.Sum(g, false, 0), y2, c, s, tensor.Sum(x, false, 1)}
		}},
	})
}
