package cuda

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestLocationPacking(t *testing.T) {
	assert.Equal(t, uintptr(0x0000_0003_0000_0001), DeviceLocation(3).packed())
	assert.Equal(t, uintptr(0x0000_0000_0000_0002), HostLocation().packed())
	assert.Equal(t, uintptr(0xFFFF_FFFF_0000_0003), Location{Type: LocationHostNUMA, ID: -1}.packed())
	assert.Equal(t, uintptr(0x0000_0001_0000_0004), Location{Type: LocationHostNUMACurrent, ID: 1}.packed())
}

func TestLocationValidate(t *testing.T) {
	assert.NoError(t, DeviceLocation(0).validate("op"))
	assert.NoError(t, HostLocation().validate("op"))
	assert.ErrorIs(t, Location{}.validate("MemPrefetchAsync"), ErrInvalidValue)
	assert.ErrorContains(t, Location{}.validate("MemPrefetchAsync"), "has no valid type")
	assert.ErrorContains(t, Location{Type: LocationDevice, ID: 1 << 40}.validate("op"), "does not fit a C int")
	assert.Equal(t, "cuda:2", DeviceLocation(2).String())
	assert.Equal(t, "host", HostLocation().String())
	assert.Equal(t, "host NUMA node 1", Location{Type: LocationHostNUMA, ID: 1}.String())
	assert.Equal(t, "location(type 9, id 0)", Location{Type: 9}.String())
}

func TestMemAdviseValidation(t *testing.T) {
	c := fakeContext(t)
	// Validation happens before the call: the fake driver would succeed.
	assert.ErrorIs(t, c.MemAdvise(0, 16, AdviseSetReadMostly, Location{}), ErrInvalidValue)
	assert.ErrorIs(t, c.MemAdvise(0x1000, 0, AdviseSetReadMostly, Location{}), ErrInvalidValue)
	assert.ErrorContains(t, c.MemAdvise(0x1000, 16, Advice(9), DeviceLocation(0)), "unknown advice 9")
	assert.ErrorContains(t, c.MemAdvise(0x1000, 16, AdviseSetPreferredLocation, Location{}), "no valid type")
	assert.ErrorIs(t, c.MemPrefetchAsync(0x1000, 16, Location{}, nil), ErrInvalidValue)
	assert.Equal(t, "SetAccessedBy", AdviseSetAccessedBy.String())
	assert.Equal(t, "Advice(0)", Advice(0).String())

	// The fake cuMemAdvise_v2 returns its first argument: a device pointer
	// of 0x0 can't pass validation, so use 1 (CUDA_ERROR_INVALID_VALUE),
	// and check that read-mostly advice fills in a device location.
	err := c.MemAdvise(1, 16, AdviseSetReadMostly, Location{})
	assert.ErrorIs(t, err, ErrInvalidValue)
	assert.ErrorContains(t, err, "SetReadMostly for 16 bytes at 0x1, cuda:0")

	c.drv.memAdvise = symbol{name: "cuMemAdvise_v2"}
	err = c.MemAdvise(1, 16, AdviseSetReadMostly, Location{})
	assert.ErrorIs(t, err, ErrNotSupported)
	assert.ErrorContains(t, err, "lacks cuMemAdvise_v2")
}
