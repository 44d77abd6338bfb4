package tensor

import (
	"fmt"
	"sync"

	"github.com/strata-ml/strata/cuda"
	"github.com/strata-ml/strata/memory"
)

// vmmCopier is the memory manager's copy function (memory.Manager.SetCopy)
// when device memory is expandable: moves between tiers (MoveTo's
// MigrateOn on the copy stream, the placement scheduler's Migrate) copy
// with the copy kernel on the move's stream instead of the copy engines.
// On the H200 (driver 580) the copy engines refused now and then copies
// into and out of ranges mapped with the virtual memory API (memory's
// package doc), and in session 17 moves of activations between mapped
// pinned host memory and such ranges failed (CUDA_ERROR_INVALID_VALUE,
// device-to-device through the host memory's alias and host-to-device by
// its host pointer alike) or, in training, changed the losses, where the
// same moves into cuMemAlloc segments were bit for bit right. With this
// copy the failures stopped; the losses that still differed came from the
// uploads (cuda_stage.go, session 21), not from the moves, which give
// classic segments' losses bit for bit since. Reading and writing mapped
// pinned memory from a kernel crosses the bus at a lower speed than the
// copy engines and takes some of the GPU's cores, the price of expandable
// segments (the device's default since session 24;
// STRATA_EXPANDABLE_SEGMENTS=0 gives classic segments and the copy engines
// back) until the driver's copies are understood.
type vmmCopier struct {
	d    *cudaDevice
	mu   sync.Mutex // guards args
	args *cuda.Args
}

// copy copies n bytes from src to dst on memory stream s with the widest
// copy kernel their alignment allows (the copy engine for odd ones).
func (v *vmmCopier) copy(dst, src uintptr, n int64, s memory.Stream) error {
	if n <= 0 {
		return nil
	}
	d := v.d
	st, err := d.streams.CUDA(s)
	if err != nil {
		return err
	}
	kb, w, ok := copyWords(int(n), dst, src)
	if !ok { // an odd size or address: the copy engine (no byte kernel)
		return d.ctx.MemcpyDtoDAsync(cuda.DevicePtr(dst), cuda.DevicePtr(src), int(n), st)
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	a := v.args.Reset()
	a.Ptr(cuda.DevicePtr(dst)).Ptr(cuda.DevicePtr(src)).Int64(1).Int64(int64(w)).Int64(int64(w)).Int64(int64(w))
	grid := grid1(w)
	if d.copy.ready.Load() && s == d.copy.memS {
		// A move on the copy stream (MoveTo) runs beside the compute: a
		// few resident blocks striding over the words keep the bus busy
		// (as the side stream's update, sideGrid) and leave the rest of
		// the SMs to the kernels it overlaps. A grid of a block per 256
		// words held SMs for the whole copy while its loads waited on
		// the bus (session 21: +15 ms forward, +30 ms backward for
		// gpt2-medium's 384 MiB of block inputs).
		grid[0] = uint32(d.sideGrid(int(grid[0]), 0))
	}
	cudaLaunches.Add(1)
	if err := d.ctx.LaunchKernelArgs(d.k.copy2D[kb], grid, block1, 0, st, a); err != nil {
		return fmt.Errorf("tensor: copying %s between memory tiers on %v by kernel: %w", memory.FormatBytes(n), d, err)
	}
	return nil
}
