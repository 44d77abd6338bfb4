package cuda

import (
	"os"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/strata-ml/strata/internal/dl"
)

// maxCallArgs bounds the arguments of any C function bound here; the
// widest, cublasGemmStridedBatchedEx, takes 23.
const maxCallArgs = 24

// frame is the reusable scratch space of one C call: the argument words
// handed to purego and the out-parameters C writes into. Frames are heap
// objects taken from a pool, so the addresses of their out slots never
// point into a goroutine stack (which the runtime may move) and a call
// allocates nothing.
type frame struct {
	args [maxCallArgs]uintptr
	out  [4]uint64
	// scal holds host-side scalars passed by pointer (cuBLAS alpha, beta).
	scal [2]float32
}

var framePool = sync.Pool{New: func() any { return new(frame) }}

// EnvNoPools=1 makes every C call take a new frame and every vmm call new
// argument memory instead of reusing pooled ones: a diagnostic for bugs
// where C memory is still read after a call returns (session 20).
const EnvNoPools = "STRATA_CUDA_NO_POOLS"

var noPools = os.Getenv(EnvNoPools) == "1"

// getFrame returns a frame with zeroed out slots.
func getFrame() *frame {
	if noPools {
		return new(frame)
	}
	f := framePool.Get().(*frame)
	f.out = [4]uint64{}
	return f
}

// release returns f to the pool; f must not be used afterwards.
func (f *frame) release() {
	if !noPools {
		framePool.Put(f)
	}
}

// outAddr is the C address of out slot i, for a T* out-parameter.
func (f *frame) outAddr(i int) uintptr { return uintptr(unsafe.Pointer(&f.out[i])) }

// scalAddr is the C address of scalar slot i, for a const float* argument.
func (f *frame) scalAddr(i int) uintptr { return uintptr(unsafe.Pointer(&f.scal[i])) }

// out32 reads out slot i as the C int or unsigned int the callee wrote.
func (f *frame) out32(i int) int32 { return int32(uint32(f.out[i])) }

// driverCalls counts every call into libcuda and libcublas made by this
// package (see DriverCalls).
var driverCalls atomic.Uint64

// DriverCalls returns how many calls this package has made into the CUDA
// driver and cuBLAS since the program started. Each costs one purego
// transition (about 60-70 ns of overhead on a 2-core EPYC, measured in
// bench_cpu_test.go, on top of the driver's own work); sample it around a
// training step to count driver calls per step.
func DriverCalls() uint64 { return driverCalls.Load() }

// addrPointer and cString are internal/dl's.
func addrPointer(addr uintptr) unsafe.Pointer { return dl.Pointer(addr) }
func cString(addr uintptr) string             { return dl.CString(addr) }

// cStringBytes returns s as a NUL-terminated byte slice for a const char*
// argument.
func cStringBytes(s string) []byte {
	b := make([]byte, len(s)+1)
	copy(b, s)
	return b
}
