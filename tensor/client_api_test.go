package tensor_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/tensor"
)

// A dtype error names the operands as they are: an integer operand of a
// one-operand op is one operand (not "operands int32 [3] and int32 [3]"),
// and an integer pair is reported with each one's own shape (MatMul of
// (1, 3) and (3, 1) int32 matrices once named [1 3] twice).
func TestDTypeErrorNamesTheOperands(t *testing.T) {
	dev := tensor.CPU()
	s := tensor.NewScope()
	defer s.Close()
	i13 := tensor.FromInt32s(dev, []int32{1, 2, 3}, 1, 3)
	i31 := tensor.FromInt32s(dev, []int32{1, 2, 3}, 3, 1)
	f31 := tensor.FromFloat32s(dev, []float32{1, 2, 3}, 3, 1)
	for _, c := range []struct {
		name string
		run  func()
		want []string // substrings of the message
		not  string
	}{
		{"Relu", func() { tensor.Relu(i13) }, []string{"tensor.Relu", "int32 operand [1 3]", "floating-point"}, "and int32"},
		{"Sum", func() { tensor.Sum(i13, false) }, []string{"tensor.Sum", "int32 operand [1 3]"}, "and int32"},
		{"MatMul", func() { tensor.MatMul(i13, i31) }, []string{"tensor.MatMul", "int32 operand [1 3]"}, "[1 3] and int32 [1 3]"},
		{"MatMul second", func() { tensor.MatMul(f31.T(), i31) }, []string{"tensor.MatMul", "float32 [1 3] and int32 [3 1]"}, ""},
		{"Add mixed", func() { tensor.Add(f31, f31.To(tensor.Float64)) }, []string{"tensor.Add", "float32 [3 1] and float64 [3 1]", "one float dtype"}, ""},
	} {
		err := tensor.Try(c.run)
		require.Error(t, err, c.name)
		assert.True(t, errors.Is(err, tensor.ErrDType), c.name)
		for _, w := range c.want {
			assert.Contains(t, err.Error(), w, c.name)
		}
		if c.not != "" {
			assert.False(t, strings.Contains(err.Error(), c.not), "%s: %v", c.name, err)
		}
	}
}

// The in-place writes need a contiguous destination (their docs say so).
// A transposed destination of the right shape was reported as a shape
// mismatch ("destination [2 2] (contiguous false), source [2 2]: shape
// mismatch"); it is an invalid argument naming the problem, as CopyFrom,
// Fill and ScaleInPlace report it. Shapes that differ stay ErrShape.
func TestInPlaceWritesNameANonContiguousDestination(t *testing.T) {
	dev := tensor.CPU()
	s := tensor.NewScope()
	defer s.Close()
	x := tensor.Arange(dev, tensor.Float32, 0, 4).Reshape(2, 2)
	for _, c := range []struct {
		name string
		run  func()
		want error
	}{
		{"AddInPlace", func() { x.T().AddInPlace(x) }, tensor.ErrArgument},
		{"AddInPlace", func() { x.Narrow(1, 0, 1).Expand(2, 2).AddInPlace(x) }, tensor.ErrArgument},
		{"WriteNarrow", func() { x.T().WriteNarrow(0, 1, x.Narrow(0, 0, 1)) }, tensor.ErrArgument},
		{"AddInPlace", func() { x.AddInPlace(x.Narrow(0, 0, 1)) }, tensor.ErrShape},
		{"WriteNarrow", func() { x.WriteNarrow(0, 1, x) }, tensor.ErrShape},
	} {
		err := tensor.Try(c.run)
		require.Error(t, err, c.name)
		assert.True(t, errors.Is(err, c.want), "%s: %v", c.name, err)
		assert.Contains(t, err.Error(), "tensor."+c.name)
		if c.want == tensor.ErrArgument {
			assert.Contains(t, err.Error(), "must be contiguous")
		}
	}
	assert.Equal(t, []float32{0, 1, 2, 3}, x.Float32s(), "nothing written")
}

// MatMul as a user calls it, against PyTorch 1.13: batch axes broadcast
// ((2, 1, 2, 3) @ (3, 3, 2) is (2, 3, 2, 2)), and zero-size dimensions give
// an empty result or, for k = 0, zeros (a sum of nothing), in every
// layout.
func TestMatMulBroadcastAndZeroSizesAgainstPyTorch(t *testing.T) {
	dev := tensor.CPU()
	s := tensor.NewScope()
	defer s.Close()
	a := tensor.Arange(dev, tensor.Float32, 0, 12).Reshape(2, 1, 2, 3)
	b := tensor.Arange(dev, tensor.Float32, 0, 18).Reshape(3, 3, 2)
	c := tensor.MatMul(a, b)
	assert.Equal(t, []int{2, 3, 2, 2}, c.Shape())
	assert.Equal(t, []float32{10, 13, 28, 40, 28, 31, 100, 112, 46, 49, 172, 184,
		46, 67, 64, 94, 172, 193, 244, 274, 298, 319, 424, 454}, c.Float32s())
	// The same through a permuted (non-contiguous) left operand.
	ap := a.Reshape(2, 2, 3).Permute(1, 0, 2).Contiguous().Permute(1, 0, 2).Unsqueeze(1)
	require.False(t, ap.IsContiguous())
	assert.Equal(t, c.Float32s(), tensor.MatMul(ap, b).Float32s())

	for _, dt := range []tensor.DType{tensor.Float32, tensor.Float64, tensor.BFloat16} {
		ones := func(sh ...int) *tensor.Tensor { return tensor.Ones(dev, dt, sh...) }
		assert.Equal(t, make([]float32, 6), tensor.MatMul(ones(2, 0), ones(0, 3)).Float32s(), dt)
		assert.Equal(t, make([]float32, 6), tensor.MatMul(ones(0, 2).T(), ones(3, 0).T()).Float32s(), dt)
		assert.Equal(t, make([]float32, 12), tensor.MatMul(ones(2, 2, 0), ones(1, 0, 3)).Float32s(), dt)
		assert.Equal(t, []int{0, 3}, tensor.MatMul(ones(0, 2), ones(2, 3)).Shape(), dt)
		assert.Equal(t, []int{4, 0}, tensor.MatMul(ones(4, 2), ones(2, 0)).Shape(), dt)
		assert.Equal(t, []int{0, 5, 4, 3}, tensor.MatMul(ones(0, 1, 4, 2), ones(5, 2, 3)).Shape(), dt)
	}
}
