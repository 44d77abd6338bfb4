package tensor_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/tensor"
)

// TestMatMulHalfOperands: float16 and bfloat16 products accumulate in
// float32 on every device, and give float32 (Float32Out) or the half
// type. The reference is the float64 product of the half-rounded values.
func TestMatMulHalfOperands(t *testing.T) {
	onDevices(t, func(t *testing.T, dev tensor.Device) {
		for _, dt := range []tensor.DType{tensor.Float16, tensor.BFloat16} {
			c := tensor.NewCtx()
			c.WithScope(func() {
				rng := rand.New(rand.NewPCG(3, 4))
				const batch, m, k, n = 3, 5, 67, 7
				a := c.RandN(dev, tensor.Float32, rng, 1, batch, m, k).To(dt)
				bt := c.RandN(dev, tensor.Float32, rng, 1, batch, n, k).To(dt)
				b := bt.Transpose(-1, -2) // a transposed view, used in place
				want := refMatMul(a.Float64s(), b.Contiguous().Float64s(), batch, m, k, n, true)

				got := tensor.MatMulWith(a, b, 0.5, tensor.MatMulMode{Float32Out: true})
				require.Equal(t, tensor.Float32, got.DType())
				require.Equal(t, []int{batch, m, n}, got.Shape())
				for i, g := range got.Float64s() {
					require.InDelta(t, 0.5*want[i], g, 1e-5*(1+math.Abs(want[i])), "%v %v element %d", dev, dt, i)
				}

				half := tensor.MatMul(a, b)
				require.Equal(t, dt, half.DType())
				tol := 1.0 / 1024 // float16: 10-bit mantissa
				if dt == tensor.BFloat16 {
					tol = 1.0 / 128
				}
				for i, g := range half.Float64s() {
					require.InDelta(t, want[i], g, tol*math.Abs(want[i])+1e-6, "%v %v element %d", dev, dt, i)
				}
			})
			require.Zero(t, c.BytesInUse())
		}
	})
}

func TestMatMulModeTF32IsFloat32OnCPU(t *testing.T) {
	c := tensor.NewCtx()
	c.WithScope(func() {
		rng := rand.New(rand.NewPCG(1, 1))
		a := c.RandN(tensor.CPU(), tensor.Float32, rng, 1, 4, 6)
		b := c.RandN(tensor.CPU(), tensor.Float32, rng, 1, 6, 3)
		require.Equal(t, tensor.MatMul(a, b).Float32s(), tensor.MatMulWith(a, b, 1, tensor.MatMulMode{TF32: true, Float32Out: true}).Float32s())
	})
}
