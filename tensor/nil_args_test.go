package tensor_test

// Nil arguments that used to panic with a nil-pointer dereference.

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/tensor"
)

// NewCPUDevice(nil) is refused where it is made, with an *OpError
// wrapping ErrArgument, instead of a device whose first op dereferences
// its nil manager.
func TestNewCPUDeviceNilManager(t *testing.T) {
	var err error
	require.NotPanics(t, func() {
		err = tensor.Try(func() {
			d := tensor.NewCPUDevice(nil)
			tensor.WithScope(func() { tensor.Zeros(d, tensor.Float32, 2) })
		})
	})
	require.ErrorIs(t, err, tensor.ErrArgument)
	require.Contains(t, err.Error(), "NewCPUDevice")
}

// Try(nil) is an error, not a nil call.
func TestTryNil(t *testing.T) {
	var err error
	require.NotPanics(t, func() { err = tensor.Try(nil) })
	require.ErrorIs(t, err, tensor.ErrArgument)
	require.Contains(t, err.Error(), "Try")
}
