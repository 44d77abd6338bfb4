package memory_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/memory"
)

func TestOOMErrorMessage(t *testing.T) {
	cause := errors.New("cuMemAlloc_v2: CUDA_ERROR_OUT_OF_MEMORY")
	e := &memory.OOMError{
		Tier: memory.TierDevice, Backend: "cuda:0",
		Requested: 20 * MiB, Limit: GiB,
		Allocated: 900 * MiB, Reserved: 950 * MiB, ReservedUnallocated: 50 * MiB,
		DeviceFree: 0, DeviceTotal: 80 * GiB,
		Cause: cause,
	}
	assert.Equal(t, "memory: out of memory on device (cuda:0): tried to allocate 20.00 MiB; limit 1.00 GiB; "+
		"900.00 MiB allocated; 950.00 MiB reserved (50.00 MiB reserved but unallocated); device free 0 B of 80.00 GiB: "+
		"cuMemAlloc_v2: CUDA_ERROR_OUT_OF_MEMORY", e.Error())
	var err error = e
	assert.ErrorIs(t, err, memory.ErrOutOfMemory)
	assert.ErrorIs(t, err, cause)
	assert.NotErrorIs(t, err, memory.ErrInvalidArgument)

	e = &memory.OOMError{Tier: memory.TierHost, Backend: "host", Requested: 512, DeviceFree: -1, DeviceTotal: -1}
	assert.Equal(t, "memory: out of memory on host (host): tried to allocate 512 B; limit none; 0 B allocated; "+
		"0 B reserved (0 B reserved but unallocated): the limit on reserved bytes would be exceeded", e.Error(),
		"an unknown device size is left out")
	require.ErrorIs(t, e, memory.ErrOutOfMemory)
}

func TestFormatBytes(t *testing.T) {
	for n, want := range map[int64]string{
		0: "0 B", 1: "1 B", 1023: "1023 B", 1024: "1.00 KiB", 1536: "1.50 KiB",
		20 * MiB: "20.00 MiB", GiB: "1.00 GiB", 80 * GiB: "80.00 GiB", 1 << 40: "1.00 TiB",
		1 << 62: "4.00 EiB", -2048: "-2.00 KiB", -1 << 63: "-9223372036854775808 B",
	} {
		assert.Equal(t, want, memory.FormatBytes(n), "FormatBytes(%d)", n)
	}
}
