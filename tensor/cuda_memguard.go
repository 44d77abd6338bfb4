package tensor

import (
	"fmt"
	"os"

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

// guardBytes is the guard's length after each storage.
const guardBytes = 4 << 10

// guardValue fills the guard.
const guardValue = 0xA5

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
	tier := st.alloc.Tier()
	if !memoryPoison && (tier == memory.TierDevice || tier == memory.TierStaging) {
		for i, b := range d.readBack("guard", st.alloc.Addr()+uintptr(st.nbytes), guardBytes) {
			if b != guardValue {
				fmt.Fprintf(os.Stderr, "strata: %s: a %s tensor made by %s at %#x (%s): byte %d past its end is %#x\n",
					EnvMemoryGuard, memory.FormatBytes(st.nbytes), st.op, st.alloc.Addr(), tier, i, b)
				break
			}
		}
	}
	if tier != memory.TierDevice {
		return
	}
	ptr := cuda.DevicePtr(st.alloc.Addr())
	if memoryPoisonKernel {
		if n := int(st.nbytes) / 2; n > 0 {
			d.launchVec("guard", d.k.fill[kB2], n, 2, func(a *cuda.Args) { a.Ptr(ptr).Int64(int64(n)).Uint16(0xFFFF) })
		}
		return
	}
	d.check("guard", "poisoning a released storage", d.ctx.MemsetD8Async(ptr, 0xFF, int(st.nbytes), d.stream))
}

// readBack synchronizes d and downloads n bytes at addr (device memory, or
// host memory by its device address), for the diagnostics of op.
func (d *cudaDevice) readBack(op string, addr uintptr, n int64) []byte {
	buf := make([]byte, n)
	d.check(op, "synchronizing to read bytes back", d.ctx.Synchronize())
	d.check(op, "reading bytes back", d.ctx.MemcpyDtoH(buf, cuda.DevicePtr(addr)))
	return buf
}
