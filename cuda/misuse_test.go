package cuda

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// requireArgError checks that err is a misuse caught before any driver
// call: an argument error (not a driver *Error) wrapping ErrInvalidValue
// and naming want.
func requireArgError(t *testing.T, err error, want string) {
	t.Helper()
	require.ErrorIs(t, err, ErrInvalidValue)
	var e *Error
	require.False(t, errors.As(err, &e), "reached the driver: %v", err)
	assert.ErrorContains(t, err, want)
}

// The virtual memory calls refuse a size that is not positive, and a
// negative alignment, before calling the driver: a Go int of -1 would
// become a size_t of 2^64-1.
func TestVMMSizeChecks(t *testing.T) {
	c := fakeContext(t)
	const p = DevicePtr(0x200000)
	before := DriverCalls()
	requireArgError(t, c.MemAddressFree(p, -1), "MemAddressFree: size -1 bytes")
	requireArgError(t, c.MemAddressFree(p, 0), "MemAddressFree: size 0 bytes")
	requireArgError(t, c.MemMap(p, -1, 5), "MemMap: size -1 bytes")
	requireArgError(t, c.MemSetAccess(p, -1), "MemSetAccess: size -1 bytes")
	requireArgError(t, c.MemUnmap(p, -(1<<40)), "MemUnmap: size -1099511627776 bytes")
	_, err := c.MemAddressReserve(1<<21, -1)
	requireArgError(t, err, "MemAddressReserve: alignment -1")
	assert.Equal(t, uint64(0), DriverCalls()-before, "no driver call")
}

// A kernel of an unloaded module is refused before any driver call, by
// Attribute and SetMaxDynamicSharedMem as by a launch; a nil *Function is
// an error, not a panic.
func TestFunctionOfUnloadedModule(t *testing.T) {
	c := fakeContext(t)
	fn := fakeFunction(c)
	fn.mod.unloaded = true
	before := DriverCalls()
	_, err := fn.Attribute(FuncNumRegs)
	requireArgError(t, err, "Function.Attribute: kernel vadd: its module was unloaded")
	requireArgError(t, fn.SetMaxDynamicSharedMem(64<<10), "SetMaxDynamicSharedMem: kernel vadd: its module was unloaded")
	assert.Equal(t, uint64(0), DriverCalls()-before, "no driver call")

	var nilFn *Function
	require.NotPanics(t, func() { _, err = nilFn.Attribute(FuncNumRegs) })
	requireArgError(t, err, "nil function")
	require.NotPanics(t, func() { err = nilFn.SetMaxDynamicSharedMem(0) })
	requireArgError(t, err, "nil function")
}

// A device-to-device copy from a nil source names the device source, not
// a host pointer.
func TestCopyDtoDNilSourceMessage(t *testing.T) {
	c := fakeContext(t)
	for _, err := range []error{c.MemcpyDtoD(0x1000, 0, 8), c.MemcpyDtoDAsync(0x1000, 0, 8, nil)} {
		requireArgError(t, err, "nil source device pointer for 8 bytes")
		assert.NotContains(t, err.Error(), "host")
	}
	requireArgError(t, c.MemcpyDtoD(0, 0x1000, 8), "nil device pointer for 8 bytes")
	requireArgError(t, c.MemcpyHtoDPtr(0x1000, nil, 8), "nil host pointer for 8 bytes")
}

// A kernel name with a NUL byte is refused: the driver would read only
// the part before it and return that kernel under the whole name.
func TestFunctionNameWithNUL(t *testing.T) {
	c := fakeContext(t)
	m := &Module{ctx: c, h: 1, kind: "PTX"}
	before := DriverCalls()
	_, err := m.Function("vadd\x00_f16")
	requireArgError(t, err, `Module.Function: kernel name "vadd\x00_f16" contains a NUL byte`)
	assert.Equal(t, uint64(0), DriverCalls()-before, "no driver call")
}
