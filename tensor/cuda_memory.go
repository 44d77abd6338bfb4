package tensor

import (
	"errors"
	"fmt"
	"math"

	"github.com/strata-ml/strata/cuda"
	"github.com/strata-ml/strata/memory"
)

// cudaDeviceBackend is device memory (cuMemAlloc) as a memory.Backend for
// TierDevice: the stand-in until package memory provides its CUDA
// backends (device, managed, staging). newCUDAManager is the one line to
// change then.
type cudaDeviceBackend struct {
	ctx    *cuda.Context
	stream *cuda.Stream
	name   string
	live   map[uintptr]int64 // regions handed out, to refuse double and foreign frees
}

func newCUDADeviceBackend(ctx *cuda.Context, stream *cuda.Stream) *cudaDeviceBackend {
	return &cudaDeviceBackend{ctx: ctx, stream: stream, name: ctx.Device().String() + " device", live: map[uintptr]int64{}}
}

// newCUDAManager builds a device's memory manager. With only device
// memory behind it, every role is placed there.
func newCUDAManager(ctx *cuda.Context, stream *cuda.Stream) (*memory.Manager, error) {
	return memory.NewManager([]memory.Backend{newCUDADeviceBackend(ctx, stream)},
		memory.Config{Policy: memory.SingleTierPolicy(memory.TierDevice)})
}

func (b *cudaDeviceBackend) Name() string      { return b.name }
func (b *cudaDeviceBackend) Tier() memory.Tier { return memory.TierDevice }

// Alloc returns size bytes of device memory; an exhausted device gives an
// error wrapping memory.ErrOutOfMemory and the driver's error.
func (b *cudaDeviceBackend) Alloc(size int64) (memory.Region, error) {
	if size <= 0 {
		return memory.Region{}, fmt.Errorf("tensor: %s: cannot allocate %d bytes: %w", b.name, size, memory.ErrInvalidArgument)
	}
	if size > math.MaxInt {
		return memory.Region{}, fmt.Errorf("tensor: %s: %d bytes: %w", b.name, size, memory.ErrOutOfMemory)
	}
	p, err := b.ctx.MemAlloc(int(size))
	if err != nil {
		if errors.Is(err, cuda.ErrOutOfMemory) {
			return memory.Region{}, fmt.Errorf("tensor: %s: allocating %s: %w (%w)", b.name, memory.FormatBytes(size), memory.ErrOutOfMemory, err)
		}
		return memory.Region{}, fmt.Errorf("tensor: %s: allocating %s: %w", b.name, memory.FormatBytes(size), err)
	}
	b.live[uintptr(p)] = size
	return memory.Region{Addr: uintptr(p), Size: size}, nil
}

// Free waits for the device's stream (kernels queued on it may still use
// the memory; cuMemFree does not wait for a non-blocking stream) and
// returns the region to the driver.
func (b *cudaDeviceBackend) Free(r memory.Region) error {
	if size, ok := b.live[r.Addr]; !ok || size != r.Size {
		return fmt.Errorf("tensor: %s: free of a region that is not one of ours (addr %#x, %d bytes): %w", b.name, r.Addr, r.Size, memory.ErrDoubleFree)
	}
	if err := b.stream.Synchronize(); err != nil {
		return fmt.Errorf("tensor: %s: waiting for the stream before freeing %#x: %w", b.name, r.Addr, err)
	}
	if err := b.ctx.MemFree(cuda.DevicePtr(r.Addr)); err != nil {
		return fmt.Errorf("tensor: %s: freeing %s at %#x: %w", b.name, memory.FormatBytes(r.Size), r.Addr, err)
	}
	delete(b.live, r.Addr)
	return nil
}

// Info reports the device's free and total memory as the driver sees it.
func (b *cudaDeviceBackend) Info() (free, total int64, ok bool) {
	f, t, err := b.ctx.MemGetInfo()
	if err != nil {
		return 0, 0, false
	}
	return int64(f), int64(t), true
}
