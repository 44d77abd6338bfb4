package cuda

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// FailCall fails exactly the n-th matching call, with the status asked
// for and the call's name, on the fake driver (libc's labs).
func TestFailCall(t *testing.T) {
	c := fakeContext(t)
	defer FailCall("", 0, 0)
	f := getFrame()
	defer f.release()
	FailCall("cuMemFree", 2, cudaErrorOutOfMemory)
	assert.True(t, c.invoke(f, c.drv.memsetD32Async, 0).ok(), "another function does not count")
	assert.True(t, c.invoke(f, c.drv.memFree, 0).ok(), "the first match passes")
	s := c.invoke(f, c.drv.memFree, 0)
	assert.Equal(t, status{cudaErrorOutOfMemory, "cuMemFree_v2"}, s, "the second fails")
	require.ErrorIs(t, s.err("x"), ErrOutOfMemory)
	assert.True(t, c.invokeGo(c.drv.memFree, 0).ok(), "once only")
	seen, failed := FaultCalls()
	assert.Equal(t, [2]int64{3, 1}, [2]int64{seen, failed})

	FailCall("", 1, 719)
	assert.Equal(t, uint32(719), c.invokeGo(c.drv.memFree, 0).code, "invokeGo is covered")
	FailCall("", 1<<62, 0) // count only
	for range 5 {
		c.invoke(f, c.drv.launchKernel, 0)
	}
	seen, failed = FaultCalls()
	assert.Equal(t, [2]int64{5, 0}, [2]int64{seen, failed})
	FailCall("", 0, 0)
	assert.True(t, c.invoke(f, c.drv.memFree, 0).ok())
	seen, _ = FaultCalls()
	assert.Zero(t, seen, "disarmed")

	assert.Equal(t, uint32(cublasStatusAllocFailed), injectedBLASStatus(cudaErrorOutOfMemory))
	assert.Equal(t, uint32(cublasStatusExecutionFailed), injectedBLASStatus(719))
}

// On a GPU: an injected out-of-memory of cuMemAlloc and an injected launch
// failure come back as errors naming the call, and the context keeps
// working.
func TestFailCallGPU(t *testing.T) {
	c := gpuContext(t)
	defer FailCall("", 0, 0)
	FailCall("cuMemAlloc", 1, cudaErrorOutOfMemory)
	_, err := c.MemAlloc(1 << 20)
	require.ErrorIs(t, err, ErrOutOfMemory)
	require.ErrorContains(t, err, "cuMemAlloc")
	p, err := c.MemAlloc(1 << 20)
	require.NoError(t, err, "the next allocation works")
	FailCall("cuMemsetD32", 1, 719)
	require.ErrorContains(t, c.MemsetD32(p, 7, 1<<18), "CUDA_ERROR_LAUNCH_FAILED")
	require.NoError(t, c.MemsetD32(p, 7, 1<<18))
	require.NoError(t, c.Synchronize())
	require.NoError(t, c.MemFree(p))
}
