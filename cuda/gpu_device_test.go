package cuda

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestGPUDeviceProperties(t *testing.T) {
	c := gpuContext(t)
	v, err := DriverVersion()
	require.NoError(t, err)
	assert.GreaterOrEqual(t, v, 12000, "driver for CUDA 12 or newer")
	path, err := DriverPath()
	require.NoError(t, err)

	p, err := Device(0).Properties()
	require.NoError(t, err)
	t.Logf("driver %s from %s; %+v", versionString(v), path, p)
	assert.NotEmpty(t, p.Name)
	assert.NotEmpty(t, p.PCIBusID)
	assert.Greater(t, p.TotalMem, 1<<30)
	assert.GreaterOrEqual(t, p.Major, 7)
	assert.Greater(t, p.Multiprocessors, 0)
	assert.Equal(t, 32, p.WarpSize)
	assert.GreaterOrEqual(t, p.MaxThreadsPerBlock, 1024)
	assert.True(t, p.UnifiedAddressing)
	assert.True(t, p.ManagedMemory)
	assert.True(t, p.CanMapHostMemory)
	assert.Equal(t, p, c.Properties(), "the context caches the same properties")

	major, minor, err := Device(0).ComputeCapability()
	require.NoError(t, err)
	assert.Equal(t, [2]int{p.Major, p.Minor}, [2]int{major, minor})

	free, total, err := c.MemGetInfo()
	require.NoError(t, err)
	assert.Equal(t, p.TotalMem, total)
	assert.Greater(t, free, 0)
	assert.LessOrEqual(t, free, total)

	n, err := DeviceCount()
	require.NoError(t, err)
	_, err = Device(n).Name()
	assert.ErrorIs(t, err, ErrNoDevice)
	assert.ErrorContains(t, err, "no such device")
	_, err = Device(-1).PrimaryContext()
	assert.ErrorIs(t, err, ErrNoDevice)

	c2, err := Device(0).PrimaryContext()
	require.NoError(t, err)
	assert.Same(t, c, c2, "the primary context is retained once")
	assert.Equal(t, int32(1), liveContexts.Load())
}
