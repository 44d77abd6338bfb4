package tensor

import (
	"fmt"

	_ "go4.org/unsafe/assume-no-moving-gc" // gorgonia panics at start on Go 1.26 without a recent copy
	gt "gorgonia.org/tensor"
)

// ToDense copies t into a gorgonia.org/tensor Dense (float32, float64 or
// int32; halves are converted to float32).
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

// FromDense copies a gorgonia Dense (float32, float64 or int32) onto dev.
func FromDense(dev Device, d *gt.Dense) (*Tensor, error) {
	shape := []int(d.Shape())
	var t *Tensor
	err := Try(func() {
		c := d
		if !d.IsMaterializable() && d.DataOrder().IsColMajor() {
			c = d.Materialize().(*gt.Dense)
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
	})
	return t, err
}
