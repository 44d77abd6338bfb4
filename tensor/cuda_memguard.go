package tensor

import (
	"fmt"
	"os"
	"sync/atomic"

	"github.com/strata-ml/strata/cuda"
	"github.com/strata-ml/strata/memory"
)

// EnvMemoryGuard=1 makes every storage on a GPU 4 KiB longer than asked,
// the extra bytes set to 0xA5 when it is made and read back when it is
// released (after a synchronisation): bytes changed there were written
// past the tensor's end by an op, reported on stderr with the op that made
// the tensor. And a released storage's own bytes are set to 0xFF (NaNs)
// on the device's stream, so that an op reading memory it did not write
// (a buffer it assumed zero, bytes past an input's end) reads NaNs
// instead of whatever a pool's cached block held. Classic segments leave
// slack after most large blocks, where such bugs go unseen; expandable
// segments pack blocks end to end. EnvMemoryGuard=poison poisons without
// the guards. A diagnostic, slow (a synchronisation a
// release), not a setting for training.
const EnvMemoryGuard = "STRATA_MEMORY_GUARD"

var (
	memoryGuard = os.Getenv(EnvMemoryGuard) == "1" || memoryPoison
	// memoryPoison: EnvMemoryGuard=poison or poison-kernel, the released
	// bytes poisoned without the guards (sizes and byte counts as without
	// the diagnostic); poison-kernel writes them with the fill kernel
	// instead of the copy engine's memset.
	memoryPoison       = os.Getenv(EnvMemoryGuard) == "poison" || memoryPoisonKernel
	memoryPoisonKernel = os.Getenv(EnvMemoryGuard) == "poison-kernel"
)

// EnvExpandableUnsafe=1 lets a CUDA device run on expandable device
// memory (memory.EnvExpandableSegments=1), which it refuses otherwise:
// training there gave wrong results on the H200 (session 20, the README's
// "Expandable segments on the GPU" section), so only for finding why.
const EnvExpandableUnsafe = "STRATA_EXPANDABLE_UNSAFE"

// EnvVMMCopyEngine=1 makes device-to-device copies use the copy engine
// (cuMemcpyDtoDAsync) with expandable device memory too, where they use
// the copy kernel (copyDevice): a diagnostic for telling the two apart.
const EnvVMMCopyEngine = "STRATA_VMM_COPY_ENGINE"

var vmmCopyEngine = os.Getenv(EnvVMMCopyEngine) == "1"

// guardBytes is the guard's length after each storage.
const guardBytes = 4 << 10

// guardValue fills the guard.
const guardValue = 0xA5

// guardReports counts the guards found changed.
var guardReports atomic.Int64

// guardDevice is dev's CUDA device when EnvMemoryGuard applies to it.
func guardDevice(dev Device) *cudaDevice {
	if !memoryGuard {
		return nil
	}
	if cb, ok := dev.backend().(cudaBackend); ok && cb.d.ctx != nil { // not the tests' recorders
		return cb.d
	}
	return nil
}

// setGuard fills st's guard, on the device's stream.
func (d *cudaDevice) setGuard(st *storage) {
	err := d.ctx.MemsetD8Async(cuda.DevicePtr(st.alloc.Addr()+uintptr(st.nbytes)), guardValue, guardBytes, d.stream)
	d.check("guard", "filling a storage's guard", err)
}

// checkGuard reads st's guard back and reports a change, then poisons
// st's bytes, before st goes back to the pool.
func (d *cudaDevice) checkGuard(st *storage) {
	if !memoryPoison && (st.alloc.Tier() == memory.TierDevice || st.alloc.Tier() == memory.TierStaging) {
		buf := make([]byte, guardBytes)
		err := d.ctx.Synchronize()
		if err == nil {
			err = d.ctx.MemcpyDtoH(buf, cuda.DevicePtr(st.alloc.Addr()+uintptr(st.nbytes)))
		}
		d.check("guard", "reading a storage's guard", err)
		for i, b := range buf {
			if b != guardValue {
				guardReports.Add(1)
				fmt.Fprintf(os.Stderr, "strata: %s: a %s tensor made by %s at %#x (%s): byte %d past its end is %#x\n",
					EnvMemoryGuard, memory.FormatBytes(st.nbytes), st.op, st.alloc.Addr(), st.alloc.Tier(), i, b)
				break
			}
		}
	}
	if st.alloc.Tier() == memory.TierDevice && memoryPoisonKernel {
		if n := int(st.nbytes) / 2; n > 0 {
			ptr := cuda.DevicePtr(st.alloc.Addr())
			d.launchVec("guard", d.k.fill[kB2], n, 2, func(a *cuda.Args) { a.Ptr(ptr).Int64(int64(n)).Uint16(0xFFFF) })
		}
	} else if st.alloc.Tier() == memory.TierDevice {
		err := d.ctx.MemsetD8Async(cuda.DevicePtr(st.alloc.Addr()), 0xFF, int(st.nbytes), d.stream)
		d.check("guard", "poisoning a released storage", err)
	}
}
