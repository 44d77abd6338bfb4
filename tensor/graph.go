package tensor

import (
	"errors"
	"fmt"
	"runtime"

	"github.com/strata-ml/strata/cuda"
	"github.com/strata-ml/strata/memory"
)

// Graph is work captured from a CUDA device's stream into a CUDA graph
// (cuStreamBeginCapture ... cuGraphInstantiate) and replayed by Launch
// with one driver call, so that a small model's step no longer pays the
// host's cost of queuing each of its hundreds of kernels.
//
// CaptureGraph runs a function of ops once in capture mode: the ops queue
// their kernels, copies and cuBLAS calls as usual, but nothing runs; the
// graph records them with their arguments and addresses. A replay does the
// same work on the same memory, so:
//
//   - Everything the captured work reads or writes across replays must
//     stay where it was: the inputs are tensors made before the capture
//     and refilled before each Launch (CopyFrom), the parameters and
//     optimizer state are allocated before it (take one eager step first),
//     and values that change from step to step are read from memory, not
//     passed as arguments: StepGuard (the clip factor and the skip flag of
//     a non-finite loss or norm) and AdamWArgs (the learning rate and the
//     bias corrections) exist for that.
//   - What the ops allocate during the capture comes from a private pool
//     (memory.CUDAStreams.Private, as PyTorch gives each graph its own):
//     blocks freed during the capture are reused by later captured work
//     exactly as on the stream, and the pool holds the private pool's
//     segments (no EmptyCache, no out-of-memory retry gives them back)
//     until the graph is released, since every replay writes them again.
//     Argument tables that eager launches upload are written once into
//     mapped host memory that the graph keeps.
//   - The captured function must not read results on the host (Item,
//     Synchronize, a download) nor upload host data: those fail with an
//     *OpError that says so. Work on the side stream (AdamW's Overlap and
//     Pipeline) and dropout (whose seed is a kernel argument, so every
//     replay would draw the same mask) are refused too.
//   - Expandable segments (memory.EnvExpandableSegments) are refused: they
//     map memory with a device synchronization, which a capture cannot
//     hold.
//   - While a capture runs, the device is the capturing goroutine's: ops
//     from other goroutines on it would be captured or break the capture.
type Graph struct {
	d        *cudaDevice
	exec     *cuda.GraphExec
	pool     memory.Stream
	tables   []*cudaMapped
	kernels  int
	released bool
}

// cudaCapture is the state of a capture in progress on a device.
type cudaCapture struct {
	pool   memory.Stream // the private pool allocations come from
	tables []*cudaMapped // argument tables the graph keeps
}

// capturing returns the capture in progress on d, or nil.
func (d *cudaDevice) capturing() *cudaCapture { return d.capture.Load() }

// refuseInCapture panics with an *OpError when d is capturing: what is
// not possible inside captured work.
func (d *cudaDevice) refuseInCapture(op, what string) {
	if d.capturing() != nil {
		panic(&OpError{Op: op, Msg: fmt.Sprintf("%s while %v captures a CUDA graph: %s", what, d, captureRule), Err: ErrArgument})
	}
}

const captureRule = "captured work replays on the device without the host, so it cannot read results on the host, upload host data, use the side stream or draw fresh random numbers (see tensor.Graph)"

// Capturing reports whether dev is capturing a graph.
func Capturing(dev Device) bool {
	d, ok := dev.(*cudaDevice)
	return ok && d.capturing() != nil
}

// CaptureGraph captures the work fn queues on dev (a CUDA device) into a
// graph, which it returns ready to Launch. fn's work is not run. An op
// that fails or is refused in fn (see Graph) ends the capture with its
// error, as does any driver error of the capture itself; nothing is kept
// then.
func CaptureGraph(dev Device, fn func()) (g *Graph, err error) {
	d, ok := dev.(*cudaDevice)
	if !ok {
		return nil, &OpError{Op: "CaptureGraph", Msg: fmt.Sprintf("%v: CUDA graphs need a CUDA device", dev), Err: ErrDevice}
	}
	if d.capturing() != nil {
		return nil, &OpError{Op: "CaptureGraph", Msg: fmt.Sprintf("%v is already capturing a graph", d), Err: ErrArgument}
	}
	if d.vmm {
		return nil, &OpError{Op: "CaptureGraph", Msg: fmt.Sprintf("%v's device memory is expandable (%s): mapping more of it synchronizes the device, which a capture cannot hold (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED on the H200); capture with classic segments", d, memory.EnvExpandableSegments), Err: ErrArgument}
	}
	if cudaProfiling {
		return nil, &OpError{Op: "CaptureGraph", Msg: "the kernel profiler times each launch with a synchronization: turn it off to capture", Err: ErrArgument}
	}
	// Nothing queued before may be part of the capture, and nothing on
	// the side stream may still be pending.
	if err := d.Synchronize(); err != nil {
		return nil, err
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	c := &cudaCapture{pool: d.streams.Private()}
	d.streams.Hold(c.pool, true)
	discard := func() {
		for _, t := range c.tables {
			t.free()
		}
		d.streams.Hold(c.pool, false)
		_ = d.mem.EmptyCache() // the private pool's blocks: nothing else can use them
	}
	if err := d.stream.BeginCapture(cuda.CaptureRelaxed); err != nil {
		discard()
		return nil, &OpError{Op: "CaptureGraph", Msg: fmt.Sprintf("beginning a capture on %v", d), Err: err}
	}
	d.capture.Store(c)
	before := CUDALaunches()
	ferr := captureRun(d, fn, discard)
	launched := int(CUDALaunches() - before)
	d.capture.Store(nil)
	graph, eerr := d.stream.EndCapture()
	if ferr != nil || eerr != nil {
		if graph != nil {
			_ = graph.Destroy()
		}
		discard()
		if ferr != nil {
			return nil, ferr
		}
		return nil, &OpError{Op: "CaptureGraph", Msg: fmt.Sprintf("ending the capture on %v (an op in it did something a capture cannot hold)", d), Err: eerr}
	}
	exec, ierr := graph.Instantiate()
	derr := graph.Destroy()
	if ierr != nil {
		discard()
		return nil, &OpError{Op: "CaptureGraph", Msg: fmt.Sprintf("instantiating the graph captured on %v", d), Err: errors.Join(ierr, derr)}
	}
	return &Graph{d: d, exec: exec, pool: c.pool, tables: c.tables, kernels: launched}, nil
}

// captureRun runs fn in the capture (Try: an *OpError becomes its error).
// Any other panic (a bug) ends the capture, discards what it made and
// goes on up, so the device is not left capturing.
func captureRun(d *cudaDevice, fn func(), discard func()) (err error) {
	ok := false
	defer func() {
		if !ok {
			d.capture.Store(nil)
			if g, eerr := d.stream.EndCapture(); eerr == nil {
				_ = g.Destroy()
			}
			discard()
		}
	}()
	err = Try(fn)
	ok = true
	return err
}

// Launch queues one replay of the graph on its device's stream, in order
// with the ops queued before and after it. Its results are read as any
// op's (a StepGuard's Result, Item).
func (g *Graph) Launch() error {
	if g == nil || g.released {
		return &OpError{Op: "Graph.Launch", Msg: "nil or released graph", Err: ErrArgument}
	}
	d := g.d
	if d.capturing() != nil {
		return &OpError{Op: "Graph.Launch", Msg: fmt.Sprintf("%v is capturing a graph", d), Err: ErrArgument}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := g.exec.Launch(d.stream); err != nil {
		return &OpError{Op: "Graph.Launch", Msg: fmt.Sprintf("launching a graph on %v", d), Err: err}
	}
	cudaGraphLaunches.Add(1)
	return nil
}

// Kernels is the number of strata kernels the graph replays (cuBLAS's
// own not counted), the launches each Launch saves.
func (g *Graph) Kernels() int { return g.kernels }

// Release waits for the graph's replays, destroys it and gives its
// private pool's memory back; releasing twice does nothing.
func (g *Graph) Release() error {
	if g == nil || g.released {
		return nil
	}
	g.released = true
	d := g.d
	serr := d.Synchronize()
	derr := g.exec.Destroy()
	for _, t := range g.tables {
		t.free()
	}
	d.streams.Hold(g.pool, false)
	return errors.Join(serr, derr, d.mem.EmptyCache())
}
