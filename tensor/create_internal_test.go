package tensor

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestFilledReleasesOnPanic: a tensor whose first fill or upload fails is
// released before the failure goes on up (no caller holds it), in a
// scope or not, and the device's bytes in use return.
func TestFilledReleasesOnPanic(t *testing.T) {
	dev := CPU()
	for _, scoped := range []bool{false, true} {
		inUse := dev.Memory().InUse()
		var made *Tensor
		run := func() {
			made = mustNew("test", nil, dev, Float32, []int{1000})
			filled(made, func() { fail("test", ErrDevice, "the fill failed") })
		}
		var err error
		if scoped {
			err = Try(func() { WithScope(run) })
		} else {
			err = Try(run)
		}
		require.ErrorIs(t, err, ErrDevice)
		require.True(t, made.Released(), "scoped %v", scoped)
		require.Equal(t, inUse, dev.Memory().InUse(), "scoped %v", scoped)
	}
	ok := filled(mustNew("test", nil, dev, Float32, []int{4}), func() {})
	require.False(t, ok.Released())
	ok.Release()
}
