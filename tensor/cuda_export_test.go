package tensor_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/tensor"
)

// CUDAStream and CUDAPointer refuse what they cannot describe, on any
// machine.
func TestCUDAExportErrors(t *testing.T) {
	_, err := tensor.CUDAStream(tensor.CPU())
	require.ErrorIs(t, err, tensor.ErrDevice)
	assert.Contains(t, err.Error(), "cpu is not a CUDA device")
	_, err = tensor.CUDAStream(nil)
	require.ErrorIs(t, err, tensor.ErrDevice)

	_, err = tensor.CUDAPointer(nil)
	require.ErrorIs(t, err, tensor.ErrArgument)

	x := tensor.FromFloat32s(tensor.CPU(), []float32{1, 2, 3, 4, 5, 6}, 2, 3)
	_, err = tensor.CUDAPointer(x)
	require.ErrorIs(t, err, tensor.ErrDevice)
	assert.Contains(t, err.Error(), "is on cpu")
	x.Release()
	_, err = tensor.CUDAPointer(x)
	require.ErrorIs(t, err, tensor.ErrReleased)
}

// On the GPU: the pointer of a view is its first element's, work queued
// on the stream with it lands in the tensor in program order, and a
// transposed view is refused.
func TestCUDAExportPointer(t *testing.T) {
	dev := cudaOrSkip(t)
	s, err := tensor.CUDAStream(dev)
	require.NoError(t, err)
	require.NotNil(t, s)
	require.NotNil(t, s.Context())

	x := tensor.FromFloat32s(dev, []float32{1, 2, 3, 4, 5, 6}, 2, 3)
	defer x.Release()
	base, err := tensor.CUDAPointer(x)
	require.NoError(t, err)
	require.NotZero(t, base)
	row := x.Narrow(0, 1, 1)
	defer row.Release()
	p, err := tensor.CUDAPointer(row)
	require.NoError(t, err)
	assert.Equal(t, base+12, p, "row 1 starts 3 float32 in")

	// Queued on the device's stream right after the op that made y, a
	// memset of row 1 is seen by the op after it, with no sync between.
	y := tensor.Scale(x, 2)
	defer y.Release()
	py, err := tensor.CUDAPointer(y)
	require.NoError(t, err)
	require.NoError(t, s.Context().MemsetD32Async(py+12, math.Float32bits(-1), 3, s))
	z := tensor.Scale(y, 1)
	defer z.Release()
	assert.Equal(t, []float32{2, 4, 6, -1, -1, -1}, z.Float32s())

	tr := x.Transpose(0, 1)
	defer tr.Release()
	_, err = tensor.CUDAPointer(tr)
	require.ErrorIs(t, err, tensor.ErrArgument)
	assert.Contains(t, err.Error(), "not contiguous")
}
