package cuda

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// Many goroutines, migrating between OS threads, allocate, copy, launch
// and free at once; every round trip must come back intact.
func TestGPUConcurrentGoroutines(t *testing.T) {
	c := gpuContext(t)
	fn, err := loadPTX(t, c, ptxVectorAdd).Function("vadd")
	require.NoError(t, err)
	const workers, rounds = 32, 40
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- hammer(c, fn, w, rounds)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}

func hammer(c *Context, fn *Function, w, rounds int) error {
	r := rand.New(rand.NewPCG(uint64(w), 99))
	s, err := c.NewStream()
	if err != nil {
		return err
	}
	defer s.Destroy()
	args, err := NewArgs()
	if err != nil {
		return err
	}
	defer args.Free()
	for i := range rounds {
		n := 4 * (1 + r.IntN(64<<10)) // bytes, whole floats
		src := randomBytes(r, n)
		async := i%2 == 1
		var p DevicePtr
		if async {
			p, err = c.MemAllocAsync(n, s)
		} else {
			p, err = c.MemAlloc(n)
		}
		if err != nil {
			return fmt.Errorf("worker %d round %d: %w", w, i, err)
		}
		round := func() error {
			if err := c.MemcpyHtoDAsync(p, src, s); err != nil {
				return err
			}
			runtime.Gosched() // invite a migration between calls
			// p = p + 0 through the kernel: exercises launches too.
			zero, err := c.MemAllocAsync(n, s)
			if err != nil {
				return err
			}
			if err := c.MemsetD8Async(zero, 0, n, s); err != nil {
				return err
			}
			grid := [3]uint32{uint32((n/4 + 255) / 256), 1, 1}
			if err := c.LaunchKernelArgs(fn, grid, [3]uint32{256, 1, 1}, 0, s, args.Reset().Ptr(p).Ptr(zero).Ptr(p).Int32(int32(n/4))); err != nil {
				return err
			}
			if err := c.MemFreeAsync(zero, s); err != nil {
				return err
			}
			got := make([]byte, n)
			if err := c.MemcpyDtoHAsync(got, p, s); err != nil {
				return err
			}
			if err := s.Synchronize(); err != nil {
				return err
			}
			if !bytes.Equal(normalizeZeros(src), normalizeZeros(got)) {
				return fmt.Errorf("%d bytes came back changed", n)
			}
			return nil
		}
		if i%4 == 0 {
			err = c.Do(round)
		} else {
			err = round()
		}
		if err != nil {
			return fmt.Errorf("worker %d round %d: %w", w, i, err)
		}
		if async {
			err = c.MemFreeAsync(p, s)
		} else {
			err = c.MemFree(p)
		}
		if err != nil {
			return fmt.Errorf("worker %d round %d: %w", w, i, err)
		}
	}
	return nil
}

// normalizeZeros maps float32 -0 and NaN payloads, which x + 0 may change,
// to canonical bits, so random bytes compare equal after a float add.
func normalizeZeros(b []byte) []byte {
	out := append([]byte(nil), b...)
	for i := 0; i+4 <= len(out); i += 4 {
		v := uint32(out[i]) | uint32(out[i+1])<<8 | uint32(out[i+2])<<16 | uint32(out[i+3])<<24
		switch {
		case v == 0x8000_0000:
			v = 0
		case v&0x7F80_0000 == 0x7F80_0000 && v&0x007F_FFFF != 0:
			v = 0x7FC0_0000
		case v&0x7F80_0000 == 0: // denormals may be flushed
			v = 0
		}
		out[i], out[i+1], out[i+2], out[i+3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
	}
	return out
}
