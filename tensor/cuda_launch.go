package tensor

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/strata-ml/strata/cuda"
	"github.com/strata-ml/strata/memory"
)

// Launch geometry. Element kernels use 256-thread blocks and a ceil-div
// grid (capped at the device limit; the kernels' grid-stride loops cover
// the rest). Row kernels use a warp per row for rows of up to
// warpRowCols elements (8 rows per block) and a 512-thread block per row
// beyond.
const (
	blockThreads    = 256
	rowBlockThreads = 512
	warpRowCols     = 1024
	maxGridX        = 1<<31 - 1
	maxGridYZ       = 65535
)

// devPtr is the device address of t's first element (0 for nil), for an
// op that reads or writes it: the access is counted
// (memory.Allocation.Touch), for the placement scheduler. The address is
// read at every call because the scheduler may migrate the storage
// between steps. When work on the device's side stream still writes the
// storage (an overlapped optimizer step), the device's stream is made to
// wait for it first (cuda_side.go): every use of device memory by an op
// passes here, so none overtakes the update.
func devPtr(t *Tensor) cuda.DevicePtr {
	if t == nil {
		return 0
	}
	t.ref.st.joinFence()
	return rawPtr(t)
}

// rawPtr is devPtr without waiting for a side-stream fence: for work
// queued on the side stream itself.
func rawPtr(t *Tensor) cuda.DevicePtr {
	t.ref.st.alloc.Touch()
	return peekPtr(t)
}

// peekPtr is t's address without counting an access, for a launcher that
// looks at it (its alignment) before devPtr: one op, one access.
func peekPtr(t *Tensor) cuda.DevicePtr {
	return cuda.DevicePtr(t.ref.st.alloc.Addr() + uintptr(t.offset*t.dtype.Size()))
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// grid1 is the 1-D grid of 256-thread blocks covering n elements.
func grid1(n int) [3]uint32 {
	return [3]uint32{uint32(min(max(ceilDiv(n, blockThreads), 1), maxGridX)), 1, 1}
}

var block1 = [3]uint32{blockThreads, 1, 1}

// rowShape picks a warp or a block per row for rows of cols elements and
// returns the kernel variant with its grid and block.
func rowShape(rows, cols int) (variant int, grid, block [3]uint32) {
	if cols <= warpRowCols {
		per := blockThreads / 32
		return kWarp, [3]uint32{uint32(min(max(ceilDiv(rows, per), 1), maxGridX)), 1, 1}, block1
	}
	return kBlock, [3]uint32{uint32(min(max(rows, 1), maxGridX)), 1, 1}, [3]uint32{rowBlockThreads, 1, 1}
}

// floatIndex returns the kernel index of a float dtype, panicking with
// ErrDType (as the CPU does) for the others.
func floatIndex(op string, dt DType) int {
	switch dt {
	case Float32:
		return kF32
	case Float64:
		return kF64
	}
	fail(op, ErrDType, "%v is not supported by this op on cuda (cast to float32 first)", dt)
	return 0
}

// sizeIndex returns the kernel index for elements of dt's size.
func sizeIndex(dt DType) int {
	switch dt.Size() {
	case 2:
		return kB2
	case 8:
		return kB8
	}
	return kB4
}

// argT appends a scalar parameter of the kernel's float type T.
func argT(a *cuda.Args, f int, v float64) *cuda.Args {
	if f == kF32 {
		return a.Float32(float32(v))
	}
	return a.Float64(v)
}

// launch queues fn on the device's stream; set appends the arguments. A
// launch the driver refuses panics with an *OpError naming op and the
// kernel. Errors of the running kernel surface at the next
// synchronization.
func (d *cudaDevice) launch(op string, fn *cuda.Function, grid, block [3]uint32, set func(a *cuda.Args)) {
	d.launchOn(nil, op, fn, grid, block, set)
}

// launchOn is launch on side stream s, or on the device's stream when s
// is nil (only those launches are profiled: the profiler times them by
// synchronizing the device's stream).
func (d *cudaDevice) launchOn(s *cudaSide, op string, fn *cuda.Function, grid, block [3]uint32, set func(a *cuda.Args)) {
	q, where := d.q, ""
	if s != nil {
		d.refuseInCapture(op, "queuing work on the side stream")
		q, where = s.q, "'s side stream"
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if cudaProfiling && s == nil {
		defer d.profileDone(op+" "+fn.Name(), time.Now())
	}
	a := d.args.Reset()
	set(a)
	cudaLaunches.Add(1)
	if c := d.capturing(); c != nil {
		c.kernels++
	}
	if err := q.launch(fn, grid, block, a); err != nil {
		panic(&OpError{Op: op, Msg: fmt.Sprintf("launching kernel %s on %v%s", fn.Name(), d, where), Err: err})
	}
}

// cudaLaunches counts kernel launches on every CUDA device.
var cudaLaunches atomic.Uint64

// cudaGraphLaunches counts Graph.Launch calls.
var cudaGraphLaunches atomic.Uint64

// CUDAGraphLaunches is the number of graph replays queued so far
// (Graph.Launch).
func CUDAGraphLaunches() uint64 { return cudaGraphLaunches.Load() }

// CUDALaunches is the number of kernels launched on CUDA devices so far
// (cuBLAS's own launches not included); sample it around a training step.
func CUDALaunches() uint64 { return cudaLaunches.Load() }

// CUDADriverCalls is the number of CUDA driver calls made so far.
func CUDADriverCalls() uint64 { return cuda.DriverCalls() }

// launch1 runs an element kernel over n elements.
func (d *cudaDevice) launch1(op string, fn *cuda.Function, n int, set func(a *cuda.Args)) {
	d.launch(op, fn, grid1(n), block1, set)
}

// launchVec runs an element kernel that moves 16 bytes a thread
// (kernels/common.cuh, map_vec) over n elements of elemSize bytes (the
// wider side's, for casts): ceil(n / (256 V)) blocks, V = 16 / elemSize.
func (d *cudaDevice) launchVec(op string, fn *cuda.Function, n, elemSize int, set func(a *cuda.Args)) {
	d.launch(op, fn, grid1(ceilDiv(n, 16/elemSize)), block1, set)
}

// scratch allocates n float64 partials for a two-pass reduction. It may
// be released as soon as the kernels using it are queued: every user of
// the device's memory queues on the same stream, so a later reuse of the
// block runs after them.
func (d *cudaDevice) scratch(op string, n int) *memory.Allocation {
	return d.scratchOn(nil, op, n)
}

// scratchOn is scratch for work on side stream s (nil: the device's
// stream): its block is cached for that stream, so it may be freed as
// soon as the work is queued there.
func (d *cudaDevice) scratchOn(s *cudaSide, op string, n int) *memory.Allocation {
	memS := d.memStream()
	if s != nil {
		memS = s.memS
	}
	a, err := d.mem.AllocStream(int64(n)*8, memory.RoleWorkspace, memS)
	if err != nil {
		panic(&OpError{Op: op, Msg: fmt.Sprintf("allocating %d bytes of reduction scratch on %v", n*8, d), Err: err})
	}
	return a
}

// table uploads a kernel's argument table (rows laid out as the kernel's
// struct declares them) into workspace memory, ordered on the stream
// before the launches that read it; free it after queueing them (the
// pool reuses the block only after the stream has passed them). The
// host bytes may be reused at once: the driver has staged them.
func (d *cudaDevice) table(op string, rows []byte) *memory.Allocation {
	return d.tableOn(nil, op, rows)
}

// tableOn is table for launches on side stream s (nil: the device's
// stream), uploaded on that stream.
func (d *cudaDevice) tableOn(s *cudaSide, op string, rows []byte) *memory.Allocation {
	d.refuseInCapture(op, "uploading a kernel's argument table from the host (AdamWSteps: use AdamWStepsGuarded)")
	q := d.q
	if s != nil {
		q = s.q
	}
	a := d.scratchOn(s, op, (len(rows)+7)/8)
	d.mu.Lock()
	err := q.copyHtoD(cuda.DevicePtr(a.Addr()), rows)
	d.mu.Unlock()
	if err != nil {
		freeScratch(a)
		d.check(op, "uploading a kernel's argument table", err)
	}
	return a
}

func freeScratch(a *memory.Allocation) {
	if a != nil {
		if err := a.Free(); err != nil {
			panic(fmt.Sprintf("tensor: freeing reduction scratch: %v", err)) // a bug: scratch frees exactly once
		}
	}
}

// check panics with an *OpError when a driver call other than a launch
// fails.
func (d *cudaDevice) check(op, what string, err error) {
	if err != nil {
		panic(&OpError{Op: op, Msg: fmt.Sprintf("%s on %v", what, d), Err: err})
	}
}
