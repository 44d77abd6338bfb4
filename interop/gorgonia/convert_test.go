package gorgonia_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	gt "gorgonia.org/tensor"

	"github.com/strata-ml/strata/interop/gorgonia"
	"github.com/strata-ml/strata/tensor"
)

var cpu = tensor.CPU()

// shared is the dtype list both libraries have.
var shared = []struct {
	s tensor.DType
	g gt.Dtype
}{{tensor.Float32, gt.Float32}, {tensor.Float64, gt.Float64}, {tensor.Int32, gt.Int32}}

// values returns 0, -1, 2, -3, ... as a strata tensor of dt and shape; 7
// of rank 0 for an empty shape.
func values(t *testing.T, dt tensor.DType, shape ...int) *tensor.Tensor {
	t.Helper()
	n := 1
	for _, s := range shape {
		n *= s
	}
	v := make([]float64, n)
	for i := range v {
		v[i] = float64(i)
		if i%2 == 1 {
			v[i] = -v[i]
		}
	}
	if len(shape) == 0 {
		return tensor.Scalar(cpu, dt, 7)
	}
	if dt == tensor.Int32 {
		iv := make([]int32, n)
		for i, x := range v {
			iv[i] = int32(x)
		}
		return tensor.FromInt32s(cpu, iv, shape...)
	}
	return tensor.FromFloats(cpu, dt, v, shape...)
}

// logical reads d's elements with At, in row-major order of its shape:
// the reference for what a conversion must produce.
func logical(t *testing.T, d *gt.Dense) []float64 {
	t.Helper()
	if d.IsScalar() {
		return []float64{asFloat(d.Data())}
	}
	var out []float64
	it := make([]int, d.Dims())
	for range d.Shape().TotalSize() {
		v, err := d.At(it...)
		require.NoError(t, err)
		out = append(out, asFloat(v))
		for k := len(it) - 1; k >= 0; k-- {
			if it[k]++; it[k] < d.Shape()[k] {
				break
			}
			it[k] = 0
		}
	}
	return out
}

func asFloat(v any) float64 {
	switch x := v.(type) {
	case float32:
		return float64(x)
	case float64:
		return x
	case int32:
		return float64(x)
	}
	panic("unexpected element type")
}

// Every dtype both libraries have goes there and back unchanged, at every
// rank, scalars included.
func TestRoundTripEveryDType(t *testing.T) {
	tensor.WithScope(func() {
		for _, dt := range shared {
			for _, shape := range [][]int{{2, 3, 4}, {5}, {1, 1}, {}} {
				x := values(t, dt.s, shape...)
				d, err := gorgonia.ToDense(x)
				require.NoError(t, err, "%v %v", dt.s, shape)
				assert.Equal(t, dt.g, d.Dtype())
				assert.Equal(t, len(shape) == 0, d.IsScalar())
				if len(shape) > 0 {
					assert.Equal(t, shape, []int(d.Shape()))
				}
				assert.Equal(t, x.Float64s(), logical(t, d), "%v %v", dt.s, shape)

				back, err := gorgonia.FromDense(cpu, d)
				require.NoError(t, err)
				assert.Equal(t, dt.s, back.DType())
				assert.Equal(t, x.Shape(), back.Shape())
				assert.Equal(t, x.RawBytes(), back.RawBytes(), "%v %v", dt.s, shape)
			}
		}
	})
}

// ToDense writes a strata view's logical order, not its storage.
func TestToDenseOfViews(t *testing.T) {
	tensor.WithScope(func() {
		x := values(t, tensor.Float64, 2, 3, 4)
		for name, v := range map[string]*tensor.Tensor{
			"transposed": x.Transpose(0, 2),
			"permuted":   x.Permute(1, 2, 0),
			"narrowed":   x.Narrow(2, 1, 2),
			"expanded":   values(t, tensor.Float64, 1, 3).Expand(2, 3),
		} {
			require.False(t, v.IsContiguous(), name)
			d, err := gorgonia.ToDense(v)
			require.NoError(t, err, name)
			assert.Equal(t, v.Shape(), []int(d.Shape()), name)
			assert.Equal(t, v.Contiguous().Float64s(), logical(t, d), name)
		}
	})
}

// FromDense keeps a Dense's logical order: a transposed or sliced view, or
// column-major data, comes out as the elements At reads, row-major, for
// every dtype.
func TestFromDenseLogicalOrder(t *testing.T) {
	for _, dt := range shared {
		dense := func(opts ...gt.ConsOpt) *gt.Dense {
			return gt.New(append([]gt.ConsOpt{gt.WithBacking(gt.Range(dt.g, 0, 24))}, opts...)...)
		}
		transposed := dense(gt.WithShape(4, 6))
		require.NoError(t, transposed.T())
		transposed3 := dense(gt.WithShape(2, 3, 4))
		require.NoError(t, transposed3.T(2, 0, 1))
		base := dense(gt.WithShape(4, 6))
		sliced, err := base.Slice(gt.S(1, 3), gt.S(2, 5))
		require.NoError(t, err)
		column, err := base.Slice(nil, gt.S(3))
		require.NoError(t, err)
		stepped, err := base.Slice(gt.S(0, 4, 2), gt.S(1, 6, 2))
		require.NoError(t, err)
		colMajor := dense(gt.WithShape(2, 3, 4), gt.AsFortran(nil))
		colMajor2 := dense(gt.WithShape(4, 6), gt.AsFortran(nil))
		colMajorSliced, err := colMajor2.Slice(gt.S(1, 3), gt.S(0, 4))
		require.NoError(t, err)
		colMajorT := dense(gt.WithShape(4, 6), gt.AsFortran(nil))
		require.NoError(t, colMajorT.T())

		for name, d := range map[string]*gt.Dense{
			"transposed": transposed, "transposed 3-d": transposed3, "sliced": sliced.(*gt.Dense),
			"column": column.(*gt.Dense), "stepped": stepped.(*gt.Dense), "column-major": colMajor,
			"column-major sliced": colMajorSliced.(*gt.Dense), "column-major transposed": colMajorT,
		} {
			got, err := gorgonia.FromDense(cpu, d)
			require.NoError(t, err, "%v %s", dt.s, name)
			assert.Equal(t, dt.s, got.DType())
			assert.Equal(t, []int(d.Shape()), got.Shape(), "%v %s", dt.s, name)
			assert.Equal(t, logical(t, d), got.Float64s(), "%v %s", dt.s, name)
			got.Release()
		}
	}
}

// FromDenseCtx makes the tensor in the caller's Ctx, on the given device.
func TestFromDenseCtx(t *testing.T) {
	c := tensor.NewCtx()
	d := gt.New(gt.WithShape(2, 2), gt.WithBacking([]float32{1, 2, 3, 4}))
	var x *tensor.Tensor
	c.WithScope(func() {
		var err error
		x, err = gorgonia.FromDenseCtx(c, cpu, d)
		require.NoError(t, err)
		assert.Equal(t, []float32{1, 2, 3, 4}, x.Float32s())
	})
	assert.True(t, x.Released(), "the Ctx's scope owned the tensor")
}

func TestConversionErrors(t *testing.T) {
	tensor.WithScope(func() {
		for _, dt := range []tensor.DType{tensor.Float16, tensor.BFloat16} {
			_, err := gorgonia.ToDense(values(t, dt, 2))
			assert.ErrorIs(t, err, tensor.ErrDType, "%v", dt)
			assert.ErrorContains(t, err, dt.String())
		}
		released := values(t, tensor.Float32, 2)
		released.Release()
		_, err := gorgonia.ToDense(released)
		assert.ErrorIs(t, err, tensor.ErrReleased)
		_, err = gorgonia.ToDense(nil)
		assert.ErrorIs(t, err, tensor.ErrArgument)
		_, err = gorgonia.ToDense(tensor.Zeros(cpu, tensor.Float32, 0, 3))
		assert.ErrorIs(t, err, tensor.ErrShape)
		assert.ErrorContains(t, err, "[0 3]")
	})

	for _, d := range []*gt.Dense{
		gt.New(gt.WithShape(2), gt.WithBacking([]int64{1, 2})),
		gt.New(gt.WithShape(2), gt.WithBacking([]int{1, 2})),
		gt.New(gt.WithShape(2), gt.WithBacking([]uint8{1, 2})),
		gt.New(gt.WithShape(2), gt.WithBacking([]bool{true, false})),
		gt.New(gt.WithShape(2), gt.WithBacking([]complex128{1, 2})),
		gt.New(gt.FromScalar(int64(3))),
	} {
		_, err := gorgonia.FromDense(cpu, d)
		assert.ErrorIs(t, err, tensor.ErrDType, "%v", d.Dtype())
		assert.ErrorContains(t, err, d.Dtype().String())
	}
	masked := gt.New(gt.WithShape(2), gt.WithBacking([]float64{1, 2}, []bool{false, true}))
	_, err := gorgonia.FromDense(cpu, masked)
	assert.ErrorIs(t, err, tensor.ErrArgument)
	assert.ErrorContains(t, err, "mask")
	_, err = gorgonia.FromDense(cpu, nil)
	assert.ErrorIs(t, err, tensor.ErrArgument)
}

// A masked scalar Dense (one made FromScalar with a mask, or one element
// sliced out of a masked Dense) is refused like any masked Dense with
// elements: gorgonia's DataSize says 0 for a scalar, and the mask was
// dropped silently.
func TestFromDenseMaskedScalar(t *testing.T) {
	base := gt.New(gt.WithShape(2), gt.WithBacking([]float32{3, 4}, []bool{false, true}))
	one, err := base.Slice(gt.S(1))
	require.NoError(t, err)
	for name, d := range map[string]*gt.Dense{
		"FromScalar": gt.New(gt.FromScalar(float32(3), []bool{true})),
		"sliced":     one.(*gt.Dense),
	} {
		require.True(t, d.IsScalar(), name)
		_, err := gorgonia.FromDense(cpu, d)
		assert.ErrorIs(t, err, tensor.ErrArgument, name)
		assert.ErrorContains(t, err, "mask", name)
	}
}
