package cuda

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A memset, a copy and a kernel captured on a stream run only when the
// instantiated graph is launched, and each launch replays all three.
func TestGPUGraphCaptureReplay(t *testing.T) {
	c := gpuContext(t)
	s, err := c.NewStream()
	require.NoError(t, err)
	defer s.Destroy()
	fn, err := loadPTX(t, c, ptxVectorAdd).Function("vadd")
	require.NoError(t, err)

	const n = 4099
	av, bv := make([]float32, n), make([]float32, n)
	for i := range av {
		av[i], bv[i] = float32(i), float32(2*i)
	}
	a, b := deviceFloats(t, c, av), deviceFloats(t, c, bv)
	buf, err := c.MemAlloc(4 * n)
	require.NoError(t, err)
	defer c.MemFree(buf)
	out, err := c.MemAlloc(4 * n)
	require.NoError(t, err)
	defer c.MemFree(out)
	sum, err := c.MemAlloc(4 * n)
	require.NoError(t, err)
	defer c.MemFree(sum)
	for _, p := range []DevicePtr{buf, out, sum} {
		require.NoError(t, c.MemsetD32(p, 0, n))
	}

	st, err := s.CaptureStatus()
	require.NoError(t, err)
	assert.Equal(t, CaptureNone, st)
	require.NoError(t, s.BeginCapture(CaptureThreadLocal))
	st, err = s.CaptureStatus()
	require.NoError(t, err)
	assert.Equal(t, CaptureActive, st)
	require.NoError(t, c.MemsetD32Async(buf, 7, n, s))
	require.NoError(t, c.MemcpyDtoDAsync(out, buf, 4*n, s))
	require.NoError(t, c.LaunchKernel(fn, [3]uint32{(n + 255) / 256, 1, 1}, [3]uint32{256, 1, 1}, 0, s, a, b, sum, int32(n)))
	g, err := s.EndCapture()
	require.NoError(t, err)
	defer g.Destroy()
	st, err = s.CaptureStatus()
	require.NoError(t, err)
	assert.Equal(t, CaptureNone, st)

	require.NoError(t, c.Synchronize())
	word := func(p DevicePtr, i int) uint32 {
		host := make([]byte, 4*n)
		require.NoError(t, c.MemcpyDtoH(host, p))
		return binary.LittleEndian.Uint32(host[4*i:])
	}
	assert.Zero(t, word(out, n-1), "captured work must not run before the graph is launched")

	x, err := g.Instantiate()
	require.NoError(t, err)
	defer x.Destroy()
	for rep := range 2 {
		require.NoError(t, c.MemsetD32(out, 0, n))
		require.NoError(t, c.MemsetD32(sum, 0, n))
		require.NoError(t, x.Launch(s))
		require.NoError(t, s.Synchronize())
		assert.Equal(t, uint32(7), word(out, 0), "replay %d: the memset and copy", rep)
		assert.Equal(t, uint32(7), word(out, n-1), "replay %d", rep)
		got := readFloats(t, c, sum, n)
		assert.Equal(t, float32(3*(n-1)), got[n-1], "replay %d: the kernel", rep)
	}
	require.NoError(t, x.Destroy())
	require.NoError(t, x.Destroy(), "twice is nothing")
	require.ErrorIs(t, x.Launch(s), ErrInvalidValue)
	require.NoError(t, g.Destroy())
	_, err = g.Instantiate()
	require.ErrorIs(t, err, ErrInvalidValue)
}

// Capture needs a stream of its own: the legacy default stream (nil) is
// refused before any driver call, as are unknown modes.
func TestGraphArguments(t *testing.T) {
	var s *Stream
	require.ErrorIs(t, s.BeginCapture(CaptureGlobal), ErrInvalidValue)
	_, err := s.EndCapture()
	require.ErrorIs(t, err, ErrInvalidValue)
	_, err = s.CaptureStatus()
	require.ErrorIs(t, err, ErrInvalidValue)
	var g *Graph
	_, err = g.Instantiate()
	require.ErrorIs(t, err, ErrInvalidValue)
	require.NoError(t, g.Destroy())
	var x *GraphExec
	require.ErrorIs(t, x.Launch(nil), ErrInvalidValue)
	assert.Equal(t, "capture invalidated", CaptureInvalidated.String())
}
