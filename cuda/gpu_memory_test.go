package cuda

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestGPUCopyRoundTrip(t *testing.T) {
	c := gpuContext(t)
	r := rand.New(rand.NewPCG(7, 7))
	for _, n := range []int{1, 7, 4096, 1<<20 + 3, 16 << 20} {
		src := randomBytes(r, n)
		d1, err := c.MemAlloc(n)
		require.NoError(t, err)
		d2, err := c.MemAlloc(n)
		require.NoError(t, err)
		require.NoError(t, c.MemcpyHtoD(d1, src))
		require.NoError(t, c.MemcpyDtoD(d2, d1, n))
		got := make([]byte, n)
		require.NoError(t, c.MemcpyDtoH(got, d2))
		assert.True(t, bytes.Equal(src, got), "%d bytes", n)

		// Unsafe-pointer forms, at an offset.
		if n > 8 {
			half := n / 2
			require.NoError(t, c.MemcpyDtoHPtr(unsafe.Pointer(&got[0]), d1.Add(half), n-half))
			assert.True(t, bytes.Equal(src[half:], got[:n-half]))
		}
		require.NoError(t, c.MemFree(d1))
		require.NoError(t, c.MemFree(d2))
	}
}

func TestGPUAsyncCopyAndMemset(t *testing.T) {
	c := gpuContext(t)
	s, err := c.NewStream()
	require.NoError(t, err)
	defer s.Destroy()
	const n = 1 << 20
	r := rand.New(rand.NewPCG(1, 9))
	src := randomBytes(r, n)

	d, err := c.MemAllocAsync(n, s)
	require.NoError(t, err)
	hp, host, err := c.MemHostAlloc(n, HostAllocPortable)
	require.NoError(t, err)
	defer c.MemFreeHost(hp)
	copy(host, src)

	require.NoError(t, c.MemcpyHtoDAsyncPtr(d, hp, n, s))
	require.NoError(t, c.MemsetD8Async(d.Add(100), 0xEE, 50, s))
	require.NoError(t, c.MemsetD32Async(d.Add(4096), 0xDEADBEEF, 16, s))
	clear(host)
	require.NoError(t, c.MemcpyDtoHAsync(host, d, s))
	require.NoError(t, c.MemFreeAsync(d, s))
	require.NoError(t, s.Synchronize())

	want := append([]byte(nil), src...)
	for i := 100; i < 150; i++ {
		want[i] = 0xEE
	}
	for i := range 16 {
		binary.LittleEndian.PutUint32(want[4096+4*i:], 0xDEADBEEF)
	}
	assert.True(t, bytes.Equal(want, host))
	done, err := s.Query()
	require.NoError(t, err)
	assert.True(t, done)

	// Synchronous memsets on the default stream.
	d2, err := c.MemAlloc(64)
	require.NoError(t, err)
	defer c.MemFree(d2)
	require.NoError(t, c.MemsetD8(d2, 3, 64))
	require.NoError(t, c.MemsetD32(d2, 0x01020304, 8))
	got := make([]byte, 64)
	require.NoError(t, c.MemcpyDtoH(got, d2))
	assert.Equal(t, []byte{4, 3, 2, 1}, got[:4])
	assert.Equal(t, byte(3), got[40])
}

func TestGPUOutOfMemory(t *testing.T) {
	c := gpuContext(t)
	_, total, err := c.MemGetInfo()
	require.NoError(t, err)
	_, err = c.MemAlloc(2 * total)
	require.ErrorIs(t, err, ErrOutOfMemory)
	var e *Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, "cuMemAlloc_v2", e.Call)
	assert.Equal(t, "CUDA_ERROR_OUT_OF_MEMORY", e.Name)
	assert.Contains(t, e.Detail, "bytes on cuda:0")
	t.Log(err)
	// The context is still usable afterwards.
	p, err := c.MemAlloc(4096)
	require.NoError(t, err)
	require.NoError(t, c.MemFree(p))
}

func TestGPUManagedMemoryAdvisePrefetch(t *testing.T) {
	c := gpuContext(t)
	if !c.Properties().ConcurrentManaged {
		t.Skip("device lacks concurrent managed access")
	}
	const n = 16 << 20 // floats: 64 MiB
	a, err := c.MemAllocManaged(n * 4)
	require.NoError(t, err)
	defer c.MemFree(a)
	out, err := c.MemAllocManaged(n * 4)
	require.NoError(t, err)
	defer c.MemFree(out)
	av := unsafe.Slice((*float32)(unsafe.Pointer(&UnsafeHostView(a, n*4)[0])), n)
	for i := range av {
		av[i] = float32(i % 1000)
	}
	dev := DeviceLocation(c.Device())
	require.NoError(t, c.MemAdvise(a, n*4, AdviseSetReadMostly, Location{}))
	require.NoError(t, c.MemAdvise(a, n*4, AdviseSetPreferredLocation, dev))
	require.NoError(t, c.MemAdvise(a, n*4, AdviseSetAccessedBy, dev))
	require.NoError(t, c.MemAdvise(out, n*4, AdviseSetPreferredLocation, HostLocation()))
	require.NoError(t, c.MemAdvise(out, n*4, AdviseSetAccessedBy, dev))

	s, err := c.NewStream()
	require.NoError(t, err)
	defer s.Destroy()
	require.NoError(t, c.MemPrefetchAsync(a, n*4, dev, s))
	fn, err := loadPTX(t, c, ptxVectorAdd).Function("vadd")
	require.NoError(t, err)
	// out = a + a, read on the device, then brought back to the host.
	require.NoError(t, c.LaunchKernel(fn, [3]uint32{(n + 255) / 256, 1, 1}, [3]uint32{256, 1, 1}, 0, s, a, a, out, int32(n)))
	require.NoError(t, c.MemPrefetchAsync(out, n*4, HostLocation(), s))
	require.NoError(t, s.Synchronize())
	ov := unsafe.Slice((*float32)(unsafe.Pointer(&UnsafeHostView(out, n*4)[0])), n)
	for _, i := range []int{0, 1, 999, 1000, n / 2, n - 1} {
		assert.Equal(t, 2*float32(i%1000), ov[i], "element %d", i)
	}
	bad := 0
	for i := range ov {
		if ov[i] != 2*float32(i%1000) {
			bad++
		}
	}
	assert.Zero(t, bad)

	for _, adv := range []Advice{AdviseUnsetReadMostly, AdviseUnsetPreferredLocation} {
		require.NoError(t, c.MemAdvise(a, n*4, adv, Location{}), "%s", adv)
	}
	require.NoError(t, c.MemAdvise(a, n*4, AdviseUnsetAccessedBy, dev))
	require.NoError(t, c.MemPrefetchAsync(a, n*4, HostLocation(), nil))
	require.NoError(t, c.Synchronize())
	assert.Equal(t, float32(999), av[999])
}

func TestGPUMappedHostMemory(t *testing.T) {
	c := gpuContext(t)
	const n = 1 << 18 // floats
	hp, host, err := c.MemHostAlloc(n*4, HostAllocPortable|HostAllocDeviceMap)
	require.NoError(t, err)
	defer c.MemFreeHost(hp)
	require.Len(t, host, n*4)
	hv := unsafe.Slice((*float32)(hp), n)
	for i := range hv {
		hv[i] = float32(i)
	}
	dp, err := c.MemHostGetDevicePointer(hp)
	require.NoError(t, err)
	if c.Properties().UnifiedAddressing {
		assert.Equal(t, uintptr(hp), uintptr(dp), "under unified addressing the device alias is the host address")
	}
	// Read the host-written bytes back through the device pointer.
	got := make([]byte, n*4)
	require.NoError(t, c.MemcpyDtoH(got, dp))
	assert.True(t, bytes.Equal(host, got))

	// A kernel reads the mapped memory directly (zero copy).
	ones := make([]float32, n)
	for i := range ones {
		ones[i] = 1
	}
	b := deviceFloats(t, c, ones)
	out, err := c.MemAlloc(n * 4)
	require.NoError(t, err)
	defer c.MemFree(out)
	fn, err := loadPTX(t, c, ptxVectorAdd).Function("vadd")
	require.NoError(t, err)
	require.NoError(t, c.LaunchKernel(fn, [3]uint32{n / 256, 1, 1}, [3]uint32{256, 1, 1}, 0, nil, dp, b, out, int32(n)))
	require.NoError(t, c.Synchronize())
	res := readFloats(t, c, out, n)
	for _, i := range []int{0, 1, n / 3, n - 1} {
		assert.Equal(t, float32(i)+1, res[i])
	}

	_, err = c.MemHostGetDevicePointer(unsafe.Pointer(&ones[0]))
	assert.Error(t, err, "Go memory is not mapped host memory")
}

func TestGPUMemPool(t *testing.T) {
	c := gpuContext(t)
	if !c.Properties().MemoryPoolsSupported {
		t.Skip("no memory pools")
	}
	require.NoError(t, c.SetMemPoolReleaseThreshold(1<<30))
	defer c.SetMemPoolReleaseThreshold(0)
	s, err := c.NewStream()
	require.NoError(t, err)
	defer s.Destroy()
	const n = 8 << 20
	p, err := c.MemAllocAsync(n, s)
	require.NoError(t, err)
	require.NoError(t, s.Synchronize())
	reserved, used, err := c.MemPoolUsage()
	require.NoError(t, err)
	assert.GreaterOrEqual(t, used, uint64(n))
	assert.GreaterOrEqual(t, reserved, used)
	require.NoError(t, c.MemFreeAsync(p, s))
	require.NoError(t, s.Synchronize())
	reserved2, used2, err := c.MemPoolUsage()
	require.NoError(t, err)
	assert.Less(t, used2, used)
	assert.GreaterOrEqual(t, reserved2, uint64(n), "the threshold keeps the memory reserved")
	require.NoError(t, c.MemPoolTrimTo(0))
	reserved3, _, err := c.MemPoolUsage()
	require.NoError(t, err)
	assert.Less(t, reserved3, reserved2)
}
