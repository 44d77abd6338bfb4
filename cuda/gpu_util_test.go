package cuda

import (
	"math/rand/v2"
	"runtime"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// gpuContext returns device 0's context, or skips the test with the
// reason when there is no usable driver or GPU.
func gpuContext(t testing.TB) *Context {
	t.Helper()
	if err := Init(); err != nil {
		t.Skipf("no CUDA driver: %v", err)
	}
	n, err := DeviceCount()
	require.NoError(t, err)
	if n == 0 {
		t.Skip("the CUDA driver sees no device")
	}
	c, err := Device(0).PrimaryContext()
	require.NoError(t, err)
	return c
}

func randomBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// floatBytes views a float32 slice as bytes for copies.
func floatBytes(v []float32) []byte {
	if len(v) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), len(v)*4)
}

func u16Bytes(v []uint16) []byte {
	if len(v) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), len(v)*2)
}

// deviceFloats allocates device memory holding v, ready for any stream.
func deviceFloats(t testing.TB, c *Context, v []float32) DevicePtr {
	t.Helper()
	p, err := c.MemAlloc(len(v) * 4)
	require.NoError(t, err)
	require.NoError(t, c.MemcpyHtoD(p, floatBytes(v)))
	// A copy from pageable memory may return before its DMA ends, and
	// non-blocking streams do not wait for the default stream.
	require.NoError(t, c.Synchronize())
	t.Cleanup(func() { _ = c.MemFree(p) })
	return p
}

// readFloats copies n float32 values back from the device.
func readFloats(t testing.TB, c *Context, p DevicePtr, n int) []float32 {
	t.Helper()
	v := make([]float32, n)
	require.NoError(t, c.MemcpyDtoH(floatBytes(v), p))
	return v
}

// loadPTX loads a PTX module and unloads it at the end of the test.
func loadPTX(t testing.TB, c *Context, src string) *Module {
	t.Helper()
	m, err := c.ModuleLoadData([]byte(src))
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Unload() })
	return m
}

// withoutCurrentContext runs fn on a locked thread on which no context is
// current, as on a thread the driver has never seen.
func withoutCurrentContext(t testing.TB, c *Context, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		// The goroutine ends locked, so the runtime retires the thread
		// instead of handing a context-less thread to other goroutines.
		runtime.LockOSThread()
		f := getFrame()
		r := uint32(f.call(c.drv.ctxSetCurrent.addr, 0))
		f.release()
		if r != cudaSuccess {
			t.Errorf("cuCtxSetCurrent(NULL): %d", r)
			return
		}
		fn()
	}()
	<-done
}
