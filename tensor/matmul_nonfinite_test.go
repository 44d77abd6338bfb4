package tensor_test

import (
	"math"
	"testing"

	"github.com/strata-ml/strata/tensor"
)

// A zero of one operand times a NaN or an Inf of the other is NaN, and so
// is every sum it enters, as in PyTorch:
//
//	torch.mm(torch.zeros(2, 2), torch.tensor([[nan, 1.], [1., 1.]]))[0, 0]  # nan
//	torch.mm(torch.zeros(1, 1), torch.tensor([[inf]]))[0, 0]                # nan
//	(torch.zeros(4, 3, dtype=torch.float64) @ b_with_one_nan)               # nan column
//
// (PyTorch 1.13, every size and transpose tried here). The products left
// those entries 0 when the zero was in the left operand: gonum's GEMM,
// which runs every float64 product and the float32 products too small for
// the assembly kernels, skips the zeros of A. A NaN weight behind a
// ReLU's zeros then vanished from the forward pass instead of showing.
// cuBLAS keeps them (checked on the GPU too).
func TestMatMulPropagatesNaNAndInfThroughZeros(t *testing.T) {
	onDevices(t, testMatMulNonFiniteThroughZeros)
}

func testMatMulNonFiniteThroughZeros(t *testing.T, dev tensor.Device) {
	for _, dt := range []tensor.DType{tensor.Float32, tensor.Float64, tensor.BFloat16} {
		for _, s := range [][3]int{{1, 1, 1}, {2, 2, 2}, {4, 3, 5}, {1, 64, 64}, {64, 64, 1}, {200, 100, 150}} {
			m, k, n := s[0], s[1], s[2]
			for _, bad := range []float64{math.NaN(), math.Inf(1)} {
				tensor.WithScope(func() {
					bv := make([]float64, k*n)
					for i := range bv {
						bv[i] = 1
					}
					bv[0] = bad // B[0][0]: column 0 of the product is NaN
					a := tensor.Zeros(dev, dt, m, k)
					b := tensor.FromFloats(dev, dt, bv, k, n)
					for name, p := range map[string]*tensor.Tensor{
						"a @ b":               tensor.MatMul(a, b),
						"a @ b (transposed)":  tensor.MatMul(a.T().Contiguous().T(), b.T().Contiguous().T()),
						"batched, b shared":   tensor.MatMul(tensor.Zeros(dev, dt, 2, m, k), b),
						"batched, b batched":  tensor.MatMul(tensor.Zeros(dev, dt, 2, m, k), b.Unsqueeze(0).Expand(2, k, n).Contiguous()),
						"Float32Out of halfs": tensor.MatMulWith(a, b, 1, tensor.MatMulMode{Float32Out: true}),
					} {
						got := p.Float64s()
						cols := p.Dim(-1)
						for i, v := range got {
							if want := i%cols == 0; math.IsNaN(v) != want || (!want && v != 0) {
								t.Fatalf("%v %v %s with B[0][0] = %v: element %d (column %d) is %v, want NaN in column 0 and 0 elsewhere (PyTorch)",
									dt, s, name, bad, i, i%cols, v)
							}
						}
					}
					c := tensor.Full(dev, dt, 5, m, n)
					if dt == tensor.BFloat16 {
						return
					}
					tensor.MatMulInto(c, a, b, 1, tensor.MatMulMode{})
					if v := c.Float64s()[0]; !math.IsNaN(v) {
						t.Fatalf("%v %v MatMulInto with B[0][0] = %v: C[0][0] = %v, want NaN", dt, s, bad, v)
					}
				})
			}
		}
	}
}
