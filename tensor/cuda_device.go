package tensor

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/strata-ml/strata/cuda"
	"github.com/strata-ml/strata/memory"
)

// cudaDevice is one GPU: its primary context, one non-blocking stream on
// which every op of the device is queued in program order (and a side
// stream, made on first use, for an optimizer update overlapped with the
// next forward pass: cuda_side.go), the loaded
// kernels, a memory manager over device memory, the mapped status block,
// and (created on the first float32 matmul) a cuBLAS handle on the same
// stream. Devices are opened once and live for the rest of the process,
// like the CPU device.
type cudaDevice struct {
	name    string
	ctx     *cuda.Context
	props   cuda.Properties
	stream  *cuda.Stream
	q       cudaQueue // queues on stream
	module  *cuda.Module
	k       *cudaKernels
	mem     *memory.Manager
	streams *memory.CUDAStreams // the pools' streams
	memS    memory.Stream       // d.stream as the pools know it
	side    cudaSide            // the side stream, made on first use (cuda_side.go)
	copy    cudaCopier          // the copy stream, made on first use (cuda_move.go)
	ring    cudaRing            // the pipelined update's copy ring, made on first use (cuda_ring.go)
	// ptrace is the pipelined update's timeline (STRATA_PIPELINE_TRACE,
	// cuda_pipeline_trace.go), made on first use.
	ptrace     *pipeTrace
	ptraceOnce sync.Once
	status     *cudaStatus

	// mu serialises launches (args is one reusable argument block) and
	// the synchronize-then-read sequences of the status block.
	mu   sync.Mutex
	args *cuda.Args
	// resultMu is held from the launch of a kernel that writes a result
	// slot of the status block until the host has read it.
	resultMu sync.Mutex

	blasOnce sync.Once
	blas     *cuda.BLAS
	blasWS   *memory.Allocation
	blasErr  error

	vmm bool // device memory is expandable (cuda_copy.go's copyDevice)

	// capture is the CUDA graph capture in progress (graph.go), or nil.
	capture atomic.Pointer[cudaCapture]
	// captureClaim is held by a CaptureGraph from its first check to its
	// return, the capture's preparation included.
	captureClaim atomic.Bool

	ltOnce sync.Once // cuBLASLt: products with epilogues (cuda_blaslt.go)
	lt     *cuda.BLASLt
	ltErr  error
}

func (d *cudaDevice) String() string          { return d.name }
func (d *cudaDevice) Kind() DeviceKind        { return KindCUDA }
func (d *cudaDevice) Memory() *memory.Manager { return d.mem }
func (d *cudaDevice) backend() backend        { return cudaBackend{d} }

// Synchronize waits for every op queued on the device. It returns the
// stream's error (a failed kernel), or the first bad-data report of a
// kernel since the last synchronization as an *OpError naming the op that
// found it (an embedding id or a class target out of range).
func (d *cudaDevice) Synchronize() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.capturing() != nil {
		return d.syncLocked() // refused
	}
	if err := d.syncSide(); err != nil {
		return fmt.Errorf("tensor: synchronizing %v's side stream: %w", d, err)
	}
	if err := d.syncCopy(); err != nil {
		return fmt.Errorf("tensor: synchronizing %v's copy stream: %w", d, err)
	}
	if err := d.syncRing(); err != nil {
		return fmt.Errorf("tensor: synchronizing %v's copy ring: %w", d, err)
	}
	return d.syncLocked()
}

// syncLocked waits for the device's stream (not the side stream: a result
// read through it waits for side-stream writes by its fences already).
func (d *cudaDevice) syncLocked() error {
	if d.capturing() != nil {
		return &OpError{Op: "Synchronize", Msg: fmt.Sprintf("waiting for %v while it captures a CUDA graph: %s", d, captureRule), Err: ErrArgument}
	}
	if err := d.q.sync(); err != nil {
		return fmt.Errorf("tensor: synchronizing %v: %w", d, err)
	}
	return d.status.take(d)
}

// syncForResult waits for the stream so that a result slot of the status
// block can be read. A pending bad-data report is raised here (this is a
// synchronization point), as is a failed kernel.
func (d *cudaDevice) syncForResult(op string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.syncLocked(); err != nil {
		if oe, ok := err.(*OpError); ok {
			panic(oe)
		}
		panic(&OpError{Op: op, Msg: "synchronizing " + d.name, Err: err})
	}
}

// cudaBackend implements backend by launching the kernels of
// kernels/*.cu on the device's stream.
type cudaBackend struct{ d *cudaDevice }

var cudaDevices struct {
	mu   sync.Mutex
	open map[int]*cudaDevice
}

func init() {
	cudaOpener = openCUDA
	cudaAbsent = func(err error) bool { return errors.Is(err, cuda.ErrNoDriver) || errors.Is(err, cuda.ErrNoDevice) }
}

// openCUDA returns device ordinal, opening it on first use. Failures are
// not cached: a later call tries again.
func openCUDA(ordinal int) (Device, error) {
	cudaDevices.mu.Lock()
	defer cudaDevices.mu.Unlock()
	if d := cudaDevices.open[ordinal]; d != nil {
		return d, nil
	}
	d, err := newCUDADevice(ordinal)
	if err != nil {
		return nil, fmt.Errorf("tensor: cuda:%d: %w: %w", ordinal, ErrDevice, err)
	}
	if cudaDevices.open == nil {
		cudaDevices.open = map[int]*cudaDevice{}
	}
	cudaDevices.open[ordinal] = d
	return d, nil
}

func newCUDADevice(ordinal int) (_ *cudaDevice, err error) {
	if ordinal < 0 {
		return nil, fmt.Errorf("negative device ordinal %d", ordinal)
	}
	if err := cuda.Init(); err != nil {
		return nil, err
	}
	n, err := cuda.DeviceCount()
	if err != nil {
		return nil, err
	}
	if ordinal >= n {
		return nil, fmt.Errorf("the driver sees %d CUDA devices: %w", n, cuda.ErrNoDevice)
	}
	ctx, err := cuda.Device(ordinal).PrimaryContext()
	if err != nil {
		return nil, err
	}
	d := &cudaDevice{name: fmt.Sprintf("cuda:%d", ordinal), ctx: ctx, props: ctx.Properties()}
	if !d.props.UnifiedAddressing || !d.props.CanMapHostMemory {
		return nil, fmt.Errorf("%s (%s) lacks unified addressing or mapped host memory, which strata needs", d.name, d.props.Name)
	}
	defer func() {
		if err != nil {
			d.close()
		}
	}()
	// Above every default stream (copies, staging) and one level under
	// the side stream, whose small bus-bound update grid (cuda_side.go)
	// takes its few SMs first.
	if d.stream, err = ctx.NewStreamPriority(cuda.PriorityHigh); err != nil {
		return nil, err
	}
	d.q = streamQueue{ctx: ctx, stream: d.stream}
	if d.module, d.k, err = loadKernels(ctx); err != nil {
		return nil, err
	}
	if d.status, err = newCUDAStatus(ctx); err != nil {
		return nil, err
	}
	if d.args, err = cuda.NewArgs(); err != nil {
		return nil, err
	}
	if d.mem, d.streams, d.memS, err = newCUDAManager(ctx, d.stream); err != nil {
		return nil, err
	}
	if d.mem.Pool(memory.TierDevice).Expandable() {
		// Device memory mapped through the virtual memory API: uploads
		// staged and copied by kernel (uploadStager), downloads
		// synchronous, device copies by kernel (copyDevice).
		d.vmm = true
		d.q = newStreamQueue(d, d.stream)
		// Moves between tiers too (cuda_vmm_copy.go).
		v := &vmmCopier{d: d}
		if v.args, err = cuda.NewArgs(); err != nil {
			return nil, err
		}
		d.mem.SetCopy(v.copy)
	}
	// cuBLAS comes up with the device, so its workspace is part of the
	// memory in use from the start; a missing cuBLAS fails float32
	// products only, with this error.
	_, _ = d.cuBLAS()
	return d, nil
}

// close releases what newCUDADevice acquired before it failed.
func (d *cudaDevice) close() {
	if d.args != nil {
		d.args.Free()
	}
	if d.status != nil {
		_ = d.ctx.MemFree(d.status.claim)
		_ = d.ctx.MemFreeHost(d.status.host)
	}
	if q, ok := d.q.(streamQueue); ok && q.stage != nil {
		_ = q.stage.free()
	}
	if d.mem != nil {
		_ = d.mem.Close()
		_ = d.streams.Close() // after the manager, which uses its events
	}
	if d.module != nil {
		_ = d.module.Unload()
	}
	if d.stream != nil {
		_ = d.stream.Destroy()
	}
}

// cuBLAS returns the device's cuBLAS handle, creating it on first use:
// bound to the device's stream, default math (no TF32: float32 products
// are IEEE float32, as on the CPU), and a workspace from the memory
// manager (32 MiB on Hopper, 4 MiB before, as NVIDIA recommends).
func (d *cudaDevice) cuBLAS() (*cuda.BLAS, error) {
	d.blasOnce.Do(func() {
		b, err := d.ctx.NewBLAS()
		if err != nil {
			d.blasErr = err
			return
		}
		ws := int64(4 << 20)
		if d.props.Major >= 9 {
			ws = 32 << 20
		}
		d.blasWS, err = d.mem.Alloc(ws, memory.RoleWorkspace)
		if err == nil {
			err = errors.Join(b.SetStream(d.stream), b.SetWorkspace(cuda.DevicePtr(d.blasWS.Addr()), int(ws)))
		}
		if err != nil {
			if d.blasWS != nil {
				_ = d.blasWS.Free()
			}
			_ = b.Destroy()
			d.blasErr = err
			return
		}
		d.blas = b
	})
	return d.blas, d.blasErr
}

// markEvent records ev (a timing event, created when nil) on the
// device's stream, for Timer.
func (b cudaBackend) markEvent(ev *cuda.Event) (*cuda.Event, error) {
	d := b.d
	made := ev == nil
	if made {
		var err error
		if ev, err = d.ctx.NewEvent(cuda.EventDefault); err != nil {
			return nil, err
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := ev.Record(d.stream); err != nil {
		if made {
			_ = ev.Destroy() // the Timer keeps no event of a failed mark
		}
		return nil, err
	}
	return ev, nil
}

var _ eventTimer = cudaBackend{}
