package tensor_test

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/tensor"
)

// UnaryTo gives exactly Unary's result cast to the half type, on every
// device, for every op of the table (inputs in every op's domain).
func TestUnaryToMatchesUnaryThenCast(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 9))
	v := make([]float64, 4099) // not a multiple of the kernel's 4-element packs
	for i := range v {
		v[i] = 0.05 + 3*rng.Float64()
	}
	onDevices(t, func(t *testing.T, dev tensor.Device) {
		tensor.WithScope(func() { // released before the next test measures memory
			x := tensor.FromFloat64s(dev, v, len(v)).To(tensor.Float32)
			for op := tensor.UnaryOp(0); op < tensor.NumUnaryOps; op++ {
				for _, half := range []tensor.DType{tensor.Float16, tensor.BFloat16} {
					got := tensor.UnaryTo(op, x, half)
					require.Equal(t, half, got.DType())
					want := tensor.Unary(op, x).To(half)
					require.Equal(t, want.Float64s(), got.Float64s(), "%v to %v on %v", op, half, dev)
				}
			}
			// An offset view (unaligned for the packs) and the rejections.
			odd := x.Narrow(0, 1, 4098)
			require.Equal(t, tensor.Gelu(odd).To(tensor.BFloat16).Float64s(), tensor.UnaryTo(tensor.OpGelu, odd, tensor.BFloat16).Float64s())
			require.ErrorIs(t, tensor.Try(func() { tensor.UnaryTo(tensor.OpGelu, x.To(tensor.Float64), tensor.BFloat16) }), tensor.ErrDType)
			require.ErrorIs(t, tensor.Try(func() { tensor.UnaryTo(tensor.OpGelu, x, tensor.Int32) }), tensor.ErrDType)
		})
	})
}

// UnaryBackwardTo gives exactly UnaryBackward's result cast to the half
// type, on every device, for every op of the table, including views whose
// offset breaks the kernel's packs.
func TestUnaryBackwardToMatchesBackwardThenCast(t *testing.T) {
	onDevices(t, func(t *testing.T, dev tensor.Device) {
		tensor.WithScope(func() {
			x, dy := unaryInputs(dev, 10)
			for op := tensor.UnaryOp(0); op < tensor.NumUnaryOps; op++ {
				y := tensor.Unary(op, x)
				for _, half := range []tensor.DType{tensor.Float16, tensor.BFloat16} {
					got := tensor.UnaryBackwardTo(op, x, y, dy, half)
					require.Equal(t, half, got.DType())
					want := tensor.UnaryBackward(op, x, y, dy).To(half)
					require.Equal(t, want.Float64s(), got.Float64s(), "%v gradient to %v on %v", op, half, dev)
				}
				require.Equal(t, tensor.UnaryBackward(op, x, y, dy).Float64s(), tensor.UnaryBackwardTo(op, x, y, dy, tensor.Float32).Float64s())
			}
			ox, ody := x.Narrow(0, 1, 4098), dy.Narrow(0, 1, 4098)
			require.Equal(t, tensor.UnaryBackward(tensor.OpGelu, ox, nil, ody).To(tensor.BFloat16).Float64s(),
				tensor.UnaryBackwardTo(tensor.OpGelu, ox, nil, ody, tensor.BFloat16).Float64s())
			require.ErrorIs(t, tensor.Try(func() { tensor.UnaryBackwardTo(tensor.OpGelu, x, nil, dy, tensor.Int32) }), tensor.ErrDType)
			x64 := x.To(tensor.Float64)
			require.ErrorIs(t, tensor.Try(func() { tensor.UnaryBackwardTo(tensor.OpGelu, x64, nil, x64, tensor.BFloat16) }), tensor.ErrDType)
			require.ErrorIs(t, tensor.Try(func() { tensor.UnaryBackwardTo(tensor.OpGelu, x, nil, nil, tensor.BFloat16) }), tensor.ErrArgument)
		})
	})
}

// A half source is computed in float32 on its widened values: UnaryTo of a
// half tensor to its own type and UnaryBackwardTo with x and y saved in
// the half type give exactly the float32 ops on the widened tensors,
// rounded once, on every device, for every op, also through views whose
// offset breaks the kernels' packs.
func TestUnaryOfHalfSources(t *testing.T) {
	onDevices(t, func(t *testing.T, dev tensor.Device) {
		tensor.WithScope(func() {
			x32, dy := unaryInputs(dev, 12)
			for _, half := range []tensor.DType{tensor.Float16, tensor.BFloat16} {
				for _, off := range []int{0, 1} {
					xh := x32.To(half).Narrow(0, off, 4099-off)
					xw := xh.To(tensor.Float32)
					d := dy.Narrow(0, off, 4099-off)
					for op := tensor.UnaryOp(0); op < tensor.NumUnaryOps; op++ {
						got := tensor.UnaryTo(op, xh, half)
						require.Equal(t, half, got.DType())
						require.Equal(t, tensor.UnaryTo(op, xw, half).Float64s(), got.Float64s(), "%v of %v on %v", op, half, dev)
						yh := got
						usesX, usesY := op.BackwardUses()
						var sx, sy, wx, wy *tensor.Tensor
						if usesX {
							sx, wx = xh, xw
						}
						if usesY {
							sy, wy = yh, yh.To(tensor.Float32)
						}
						gb := tensor.UnaryBackwardTo(op, sx, sy, d, half)
						require.Equal(t, tensor.UnaryBackwardTo(op, wx, wy, d, half).Float64s(), gb.Float64s(), "%v gradient of %v on %v", op, half, dev)
					}
				}
			}
		})
	})
}

// unaryInputs returns x (4099 float32 values in (0.05, 3.05), in every
// unary op's domain; not a multiple of the kernels' packs) and a gradient
// dy of normal values, on dev, from seed.
func unaryInputs(dev tensor.Device, seed uint64) (x, dy *tensor.Tensor) {
	rng := rand.New(rand.NewPCG(seed, seed+1))
	v, g := make([]float64, 4099), make([]float64, 4099)
	for i := range v {
		v[i] = 0.05 + 3*rng.Float64()
		g[i] = rng.NormFloat64()
	}
	return tensor.FromFloat64s(dev, v, len(v)).To(tensor.Float32), tensor.FromFloat64s(dev, g, len(g)).To(tensor.Float32)
}
