package tensor

// Test-only: ToDense and FromDense as they were before they moved to
// package interop/gorgonia, kept so that the two interop checks left in
// tensor_test.go (TestSafetensorsAndDenseRoundTrip) and cuda_device_test.go
// compile while other work is under way in those files. The package itself
// no longer imports gorgonia; tests of a dependency are never built by
// the programs that import it, so gorgonia reaches none of them. Delete
// this file together with those two call sites (interop/gorgonia's tests
// cover the same round trips, on the CPU and on CUDA).

import (
	"fmt"
	"slices"

	_ "go4.org/unsafe/assume-no-moving-gc" // gorgonia panics at start on Go 1.26 without a recent copy
	gt "gorgonia.org/tensor"
)

// ToDense copies t into a gorgonia Dense (halves become float32).
func (t *Tensor) ToDense() *gt.Dense {
	t.live("ToDense")
	shape := t.Shape()
	if len(shape) == 0 {
		shape = []int{1}
	}
	switch t.dtype {
	case Float64:
		return gt.New(gt.WithShape(shape...), gt.WithBacking(t.Float64s()))
	case Int32:
		return gt.New(gt.WithShape(shape...), gt.WithBacking(t.Int32s()))
	default:
		return gt.New(gt.WithShape(shape...), gt.WithBacking(t.Float32s()))
	}
}

// FromDense copies a gorgonia Dense onto dev in its logical order.
func FromDense(dev Device, d *gt.Dense) (*Tensor, error) {
	var t *Tensor
	err := Try(func() {
		c := d
		if d.IsMaterializable() {
			c = d.Materialize().(*gt.Dense)
		}
		shape := []int(c.Shape())
		colMajor := c.DataOrder().IsColMajor() && len(shape) > 1
		if colMajor {
			// Column-major data is the row-major data of the reversed
			// shape; reversing the axes back gives the tensor.
			shape = slices.Clone(shape)
			slices.Reverse(shape)
		}
		switch data := c.Data().(type) {
		case []float32:
			t = FromFloat32s(dev, data, shape...)
		case []float64:
			t = FromFloat64s(dev, data, shape...)
		case []int32:
			t = FromInt32s(dev, data, shape...)
		case float32:
			t = FromFloat32s(dev, []float32{data}, shape...)
		case float64:
			t = FromFloat64s(dev, []float64{data}, shape...)
		default:
			panic(&OpError{Op: "FromDense", Msg: fmt.Sprintf("element type %v", d.Dtype()), Err: ErrDType})
		}
		if colMajor {
			perm := make([]int, len(shape))
			for i := range perm {
				perm[i] = len(shape) - 1 - i
			}
			rev := t.Permute(perm...)
			u := rev.Contiguous()
			rev.Release()
			t.Release()
			t = u
		}
	})
	return t, err
}
