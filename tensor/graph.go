package tensor

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"

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
//   - The device's cached free memory is given back before the capture
//     (memory.Manager.EmptyCache): blocks the eager steps freed serve no
//     replay, and kept, they and the graph's private pool made the peak
//     reserved bytes of a captured training step 1.6x to 2x the
//     allocated peak.
//   - What the ops allocate during the capture comes from a private pool
//     (memory.CUDAStreams.Private, as PyTorch gives each graph its own):
//     blocks freed during the capture are reused by later captured work
//     exactly as on the stream, and the pool holds the private pool's
//     segments (no EmptyCache, no out-of-memory retry gives them back)
//     until the graph is released, since every replay writes them again.
//     Argument tables that eager launches upload (the sums of squares,
//     the guarded clip, unscale and update) are written once into mapped
//     host memory that the graph keeps.
//   - The captured function must not read results on the host (Item,
//     Synchronize, a download) nor upload host data: those fail with an
//     *OpError that says so. AdamWSteps (its table carries the learning
//     rate: use AdamWStepsGuarded), work on the side stream (AdamW's
//     Overlap and Pipeline) and dropout (whose seed is a kernel argument,
//     so every replay would draw the same mask) are refused too.
//   - Tensors made before the capture and released during it are freed
//     when the graph is released, not at once: its replays may use them.
//   - The StepGuard and AdamWArgs a captured step reads must outlive the
//     graph.
//   - On expandable device memory (memory.EnvExpandableSegments, the
//     default) the private pool grows a range of its own during the
//     capture by mapping pages it creates or lends from its own free
//     blocks, never by stealing from other ranges or sweeping stale ones,
//     which would synchronize the device (the pool's held streams,
//     memory's stream_sync.go); the addresses it lent from stay mapped
//     until the graph is released, since the replays write them. The
//     cache given back before the capture leaves the device's free memory
//     to the capture (which cannot take other streams' free pages).
//     STRATA_EXPANDABLE_SYNC=1 (a synchronization at every mapping) is
//     refused.
//   - While a capture runs, the device is the capturing goroutine's: ops
//     from other goroutines on it would be captured or break the capture.
type Graph struct {
	d        *cudaDevice
	exec     *cuda.GraphExec
	c        *cudaCapture
	released bool
}

// cudaCapture is the state of a capture in progress on a device, then
// what its graph keeps.
type cudaCapture struct {
	pool   memory.Stream // the private pool allocations come from
	tables []*cudaMapped // argument tables the graph keeps
	// deferred are allocations made before the capture and freed during
	// it: the graph's replays may still use them, so they are freed when
	// the graph is (as PyTorch defers such frees).
	deferred []*memory.Allocation
	mu       sync.Mutex // deferred: the leak safety net may release from another goroutine
	kernels  int        // strata kernels queued during the capture
	// written are the storages the captured work writes in place (the
	// in-place ops' version counts, version.go): each replay counts a
	// write on them, as running the ops would.
	written map[*storage]bool
}

// captures maps each capturing device's memory manager to its capture,
// for storage.release (capturing counts them: the free path's one check).
var (
	captures  sync.Map // *memory.Manager -> *cudaCapture
	capturing atomic.Int32
)

// deferFree keeps a, freed during a capture on its manager's device but
// allocated before it, for the graph to free, and reports whether it did.
func deferFree(a *memory.Allocation) bool {
	if capturing.Load() == 0 {
		return false
	}
	v, ok := captures.Load(a.Manager())
	if !ok {
		return false
	}
	c := v.(*cudaCapture)
	if a.Stream() == c.pool {
		return false // the capture's own: the private pool reuses it in stream order
	}
	c.mu.Lock()
	c.deferred = append(c.deferred, a)
	c.mu.Unlock()
	return true
}

// free gives back what the capture kept: its tables, the frees it
// deferred, and the private pool (held no more; its cached segments
// released, the other streams' cache untouched).
func (c *cudaCapture) free(d *cudaDevice) error {
	for _, t := range c.tables {
		t.free()
	}
	var errs []error
	for _, a := range c.deferred {
		errs = append(errs, a.Free())
	}
	c.tables, c.deferred = nil, nil
	d.streams.Hold(c.pool, false)
	return errors.Join(append(errs, d.mem.EmptyStreamCache(c.pool))...)
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

// refuseDropout is refuseInCapture for dropout with a positive rate.
func (d *cudaDevice) refuseDropout(op string, p float64) {
	if p > 0 {
		d.refuseInCapture(op, "dropout (its seed is a kernel argument: every replay would drop the same elements)")
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
	// Checking that the device is free and claiming it are one step, so
	// that two goroutines cannot both find it free and begin captures on
	// it: d.capture is set only once the capture has begun, after the
	// synchronization below.
	if !d.captureClaim.CompareAndSwap(false, true) {
		return nil, &OpError{Op: "CaptureGraph", Msg: fmt.Sprintf("%v is already capturing a graph", d), Err: ErrArgument}
	}
	defer d.captureClaim.Store(false)
	if testHookCaptureClaimed != nil {
		testHookCaptureClaimed(d)
	}
	if cudaProfiling {
		return nil, &OpError{Op: "CaptureGraph", Msg: "the kernel profiler times each launch with a synchronization: turn it off to capture", Err: ErrArgument}
	}
	if d.vmm && os.Getenv(memory.EnvExpandableSync) == "1" {
		return nil, &OpError{Op: "CaptureGraph", Msg: fmt.Sprintf("%s=1 synchronizes the device at every page mapped, which a capture cannot hold: unset it to capture", memory.EnvExpandableSync), Err: ErrArgument}
	}
	// Nothing queued before may be part of the capture, and nothing on
	// the side stream may still be pending.
	if err := d.Synchronize(); err != nil {
		return nil, err
	}
	// The eager steps' cache goes back first: the capture allocates from
	// its own pool, which would otherwise stack on blocks the eager steps
	// freed and no replay can use (train-gpt on the H200 reserved 1.6x
	// to 2x its allocated peak with a graph, 1.05x without).
	if err := d.mem.EmptyCache(); err != nil {
		return nil, &OpError{Op: "CaptureGraph", Msg: fmt.Sprintf("giving back %v's cached memory before the capture", d), Err: err}
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	c := &cudaCapture{pool: d.streams.Private()}
	d.streams.Hold(c.pool, true)
	stop := func() { // the capture is over for the ops and for storage.release
		d.capture.Store(nil)
		captures.Delete(d.mem)
		capturing.Add(-1)
	}
	if err := d.stream.BeginCapture(cuda.CaptureRelaxed); err != nil {
		_ = c.free(d)
		return nil, &OpError{Op: "CaptureGraph", Msg: fmt.Sprintf("beginning a capture on %v", d), Err: err}
	}
	captures.Store(d.mem, c)
	capturing.Add(1)
	d.capture.Store(c)
	ferr := captureRun(d, c, fn, stop)
	stop()
	graph, eerr := d.stream.EndCapture()
	if ferr != nil || eerr != nil {
		if graph != nil {
			_ = graph.Destroy()
		}
		_ = c.free(d)
		if ferr != nil {
			return nil, ferr
		}
		return nil, &OpError{Op: "CaptureGraph", Msg: fmt.Sprintf("ending the capture on %v (an op in it did something a capture cannot hold)", d), Err: eerr}
	}
	exec, ierr := graph.Instantiate()
	derr := graph.Destroy()
	if ierr != nil {
		_ = c.free(d)
		return nil, &OpError{Op: "CaptureGraph", Msg: fmt.Sprintf("instantiating the graph captured on %v", d), Err: errors.Join(ierr, derr)}
	}
	return &Graph{d: d, exec: exec, c: c}, nil
}

// testHookCaptureClaimed, for tests, runs in CaptureGraph once the device
// is claimed.
var testHookCaptureClaimed func(*cudaDevice)

// captureRun runs fn in capture c (Try: an *OpError becomes its error).
// Any other panic (a bug) stops and ends the capture and frees what it
// made (nothing of it ran) before going on up, so the device is not left
// capturing.
func captureRun(d *cudaDevice, c *cudaCapture, fn func(), stop func()) (err error) {
	ok := false
	defer func() {
		if !ok {
			stop()
			if g, eerr := d.stream.EndCapture(); eerr == nil {
				_ = g.Destroy()
			}
			_ = c.free(d)
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
	for st := range g.c.written {
		st.version.Add(1)
	}
	cudaGraphLaunches.Add(1)
	return nil
}

// Kernels is the number of strata kernels the graph replays (cuBLAS's
// own not counted), the launches each Launch saves.
func (g *Graph) Kernels() int { return g.c.kernels }

// Release waits for the graph's replays, destroys it and gives back its
// private pool's memory, its tables and the allocations freed during its
// capture; releasing twice does nothing. It fails, releasing nothing,
// while the device captures.
func (g *Graph) Release() error {
	if g == nil || g.released {
		return nil
	}
	d := g.d
	if d.capturing() != nil {
		return &OpError{Op: "Graph.Release", Msg: fmt.Sprintf("%v is capturing a graph: release this one after", d), Err: ErrArgument}
	}
	g.released = true
	serr := d.Synchronize()
	derr := g.exec.Destroy()
	return errors.Join(serr, derr, g.c.free(d))
}
