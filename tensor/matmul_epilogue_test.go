package tensor_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/tensor"
)

// The epilogue products in half precision with float32 results (autocast's
// products) agree with the composed ops on every device: the bias added
// to the float32 product, the row sums of the half operand in float32.
func TestMatMulEpiloguesHalf(t *testing.T) {
	rng := rand.New(rand.NewPCG(10, 11))
	randn := func(dev tensor.Device, shape ...int) *tensor.Tensor {
		n := 1
		for _, s := range shape {
			n *= s
		}
		v := make([]float64, n)
		for i := range v {
			v[i] = rng.NormFloat64()
		}
		return tensor.FromFloat64s(dev, v, shape...).To(tensor.Float32)
	}
	onDevices(t, func(t *testing.T, dev tensor.Device) {
		tensor.WithScope(func() { // released before the next test measures memory
			mode := tensor.MatMulMode{Float32Out: true}
			for _, half := range []tensor.DType{tensor.BFloat16, tensor.Float16} {
				x, w, g := randn(dev, 64, 768).To(half), randn(dev, 2304, 768).To(half), randn(dev, 64, 2304).To(half)
				b := randn(dev, 2304)
				y := tensor.MatMulBias(x, w.T(), b, mode)
				require.Equal(t, tensor.Float32, y.DType())
				want := tensor.Add(tensor.MatMulWith(x, w.T(), 1, mode), b)
				requireClose(t, want.Float64s(), y.Float64s(), 1e-5, "%v bias on %v", half, dev)
				gw, gb := tensor.MatMulRowSums(g.T(), x, mode)
				require.Equal(t, []int{2304}, gb.Shape())
				requireClose(t, tensor.MatMulWith(g.T(), x, 1, mode).Float64s(), gw.Float64s(), 1e-5, "%v weight gradient on %v", half, dev)
				requireClose(t, tensor.Sum(g.To(tensor.Float32), false, 0).Float64s(), gb.Float64s(), 1e-5, "%v bias gradient on %v", half, dev)
			}
		})
	})
}

// requireClose checks |got - want| <= tol (|want| + 1) element by element.
func requireClose(t *testing.T, want, got []float64, tol float64, msg string, args ...any) {
	t.Helper()
	require.Len(t, got, len(want))
	for i := range want {
		if math.Abs(got[i]-want[i]) > tol*(math.Abs(want[i])+1) {
			t.Fatalf("%s: element %d is %g, want %g", fmt.Sprintf(msg, args...), i, got[i], want[i])
		}
	}
}
