package tensor_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/tensor"
)

// MatMulInto equals the composed ops on every device: beta 1 adds the
// product to c (a weight gradient summed over chunks), beta 0 overwrites
// c without reading it (NaN there stays out), beta 2 scales it; with
// transposed views, in float32 and float64, and with half operands and a
// float32 c under Float32Out; into a row slice of a larger tensor.
func TestMatMulInto(t *testing.T) {
	rng := rand.New(rand.NewPCG(12, 13))
	onDevices(t, func(t *testing.T, dev tensor.Device) {
		tensor.WithScope(func() {
			randn := func(dt tensor.DType, shape ...int) *tensor.Tensor {
				return tensor.RandN(dev, tensor.Float32, rng, 1, shape...).To(dt)
			}
			for _, dt := range []tensor.DType{tensor.Float32, tensor.Float64, tensor.BFloat16, tensor.Float16} {
				mode, cdt, tol := tensor.MatMulMode{}, dt, 1e-5
				if dt.IsHalf() {
					mode.Float32Out, cdt = true, tensor.Float32
				}
				g, x := randn(dt, 37, 48), randn(dt, 37, 64)
				for _, beta := range []float64{0, 1, 2} {
					c := randn(cdt, 48, 64)
					want := tensor.Add(tensor.MatMulWith(g.T(), x, 1, mode), tensor.Scale(c, beta))
					if beta == 0 {
						c.Fill(math.NaN())
					}
					tensor.MatMulInto(c, g.T(), x, beta, mode)
					requireClose(t, want.Float64s(), c.Float64s(), tol, "%v beta %v on %v", dt, beta, dev)
				}
				// into rows 5..41 of a (50, 48) tensor, the rest untouched
				big := randn(cdt, 50, 48)
				before := big.Float64s()
				rows := big.Narrow(0, 5, 37)
				w := randn(dt, 64, 48)
				tensor.MatMulInto(rows, x, w, 0, mode)
				got := big.Float64s()
				requireClose(t, tensor.MatMulWith(x, w, 1, mode).Float64s(), got[5*48:42*48], tol, "%v slice on %v", dt, dev)
				require.Equal(t, before[:5*48], got[:5*48], "%v rows before the slice", dt)
				require.Equal(t, before[42*48:], got[42*48:], "%v rows after the slice", dt)
			}
			a, b := randn(tensor.Float32, 4, 3), randn(tensor.Float32, 3, 5)
			bad := []struct {
				name string
				c    *tensor.Tensor
				err  error
			}{
				{"shape", randn(tensor.Float32, 5, 4), tensor.ErrShape},
				{"dtype", randn(tensor.Float64, 4, 5), tensor.ErrDType},
				{"strided", randn(tensor.Float32, 5, 4).T(), tensor.ErrArgument},
			}
			for _, tc := range bad {
				err := tensor.Try(func() { tensor.MatMulInto(tc.c, a, b, 1, tensor.MatMulMode{}) })
				require.Error(t, err, tc.name)
				require.True(t, errors.Is(err, tc.err), "%s: %v", tc.name, err)
			}
			err := tensor.Try(func() { tensor.MatMulInto(a, a, randn(tensor.Float32, 3, 3), 1, tensor.MatMulMode{}) })
			require.ErrorIs(t, err, tensor.ErrArgument, "c overlapping an operand")
			sq := randn(tensor.Float32, 8, 4)
			top, bottom := sq.Narrow(0, 0, 4), sq.Narrow(0, 4, 4)
			err = tensor.Try(func() { tensor.MatMulInto(top, bottom, randn(tensor.Float32, 4, 4), 1, tensor.MatMulMode{}) })
			require.ErrorIs(t, err, tensor.ErrArgument, "c a view of an operand's storage")
		})
	})
}
