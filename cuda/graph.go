package cuda

import "fmt"

// Stream capture into CUDA graphs: the work queued on a stream between
// BeginCapture and EndCapture is recorded, not run, as a graph;
// Instantiate turns it into an executable graph whose Launch replays every
// kernel, copy and memset of it, with the same arguments and device
// addresses, in one call, so the host pays for the launches once instead
// of at every replay (PyTorch's torch.cuda.CUDAGraph). What is captured
// must not synchronize the host with the stream, read results back or
// allocate with cuMemAlloc; the buffers it uses must stay valid, and
// their contents are what the replay reads. The entry points are
// optional: a driver without them loads, and these methods then fail with
// ErrNotSupported.

// graphSymbols are the capture and graph entry points.
type graphSymbols struct {
	beginCapture, endCapture, isCapturing, instantiate, launch, execDestroy, destroy symbol
}

func (g *graphSymbols) specs(opt func(*symbol, ...string) symbolSpec) []symbolSpec {
	return []symbolSpec{
		opt(&g.beginCapture, "cuStreamBeginCapture_v2", "cuStreamBeginCapture"),
		opt(&g.endCapture, "cuStreamEndCapture"),
		opt(&g.isCapturing, "cuStreamIsCapturing"),
		opt(&g.instantiate, "cuGraphInstantiateWithFlags"),
		opt(&g.launch, "cuGraphLaunch"),
		opt(&g.execDestroy, "cuGraphExecDestroy"),
		opt(&g.destroy, "cuGraphDestroy"),
	}
}

// CaptureMode is a CUstreamCaptureMode: which calls of other threads
// (cuMemAlloc, synchronizations: calls unsafe while work is being
// captured) are refused during the capture.
type CaptureMode int

const (
	// CaptureGlobal refuses unsafe calls in every thread while any
	// capture in this mode is under way (CUDA's default).
	CaptureGlobal CaptureMode = 0
	// CaptureThreadLocal refuses them in the capturing thread only.
	CaptureThreadLocal CaptureMode = 1
	// CaptureRelaxed refuses nothing (the caller takes care).
	CaptureRelaxed CaptureMode = 2
)

// CaptureStatus is a stream's CUstreamCaptureStatus.
type CaptureStatus int

const (
	// CaptureNone: the stream is not capturing.
	CaptureNone CaptureStatus = 0
	// CaptureActive: work queued on the stream is being captured.
	CaptureActive CaptureStatus = 1
	// CaptureInvalidated: the capture failed (an unsafe call, work that
	// cannot be captured); EndCapture will return the error.
	CaptureInvalidated CaptureStatus = 2
)

func (s CaptureStatus) String() string {
	switch s {
	case CaptureNone:
		return "not capturing"
	case CaptureActive:
		return "capturing"
	case CaptureInvalidated:
		return "capture invalidated"
	}
	return fmt.Sprintf("CaptureStatus(%d)", int(s))
}

// graphCall checks that sym exists and calls it on frame f (whose out
// slots the caller may pass and read) with the context current; detail
// describes the call in an error (called only then: a replay's launch
// must not format anything).
func (c *Context) graphCall(f *frame, op string, sym symbol, detail func() string, args ...uintptr) error {
	if sym.addr == 0 {
		return c.missing(op, sym)
	}
	if st := c.invoke(f, sym, args...); !st.ok() {
		return st.err(detail())
	}
	return nil
}

// BeginCapture starts capturing the work queued on s into a graph
// (cuStreamBeginCapture). The legacy default stream cannot capture.
func (s *Stream) BeginCapture(mode CaptureMode) error {
	if err := s.usable("Stream.BeginCapture"); err != nil {
		return err
	}
	if mode < CaptureGlobal || mode > CaptureRelaxed {
		return invalidArg("Stream.BeginCapture", "capture mode %d unknown", int(mode))
	}
	f := getFrame()
	defer f.release()
	return s.ctx.graphCall(f, "Stream.BeginCapture", s.ctx.drv.graph.beginCapture, s.String, s.h, uintptr(mode))
}

// EndCapture ends s's capture and returns the graph of what was queued
// since BeginCapture (cuStreamEndCapture). A capture that was invalidated
// returns its error (CUDA_ERROR_STREAM_CAPTURE_INVALIDATED or the call
// that broke it) and no graph.
func (s *Stream) EndCapture() (*Graph, error) {
	if err := s.usable("Stream.EndCapture"); err != nil {
		return nil, err
	}
	f := getFrame()
	defer f.release()
	if err := s.ctx.graphCall(f, "Stream.EndCapture", s.ctx.drv.graph.endCapture, s.String, s.h, f.outAddr(0)); err != nil {
		return nil, err
	}
	return &Graph{ctx: s.ctx, h: uintptr(f.out[0])}, nil
}

// CaptureStatus reports whether s is capturing (cuStreamIsCapturing).
func (s *Stream) CaptureStatus() (CaptureStatus, error) {
	if err := s.usable("Stream.CaptureStatus"); err != nil {
		return 0, err
	}
	f := getFrame()
	defer f.release()
	if err := s.ctx.graphCall(f, "Stream.CaptureStatus", s.ctx.drv.graph.isCapturing, s.String, s.h, f.outAddr(0)); err != nil {
		return 0, err
	}
	return CaptureStatus(f.out32(0)), nil
}

// Graph is a captured CUgraph: the work, not yet executable.
type Graph struct {
	ctx       *Context
	h         uintptr
	destroyed bool
}

func (g *Graph) String() string { return fmt.Sprintf("graph %#x", g.h) }

func (g *Graph) usable(op string) error {
	if g == nil {
		return invalidArg(op, "nil graph")
	}
	if g.destroyed {
		return invalidArg(op, "%s was destroyed", g)
	}
	if g.ctx == nil {
		return invalidArg(op, "%s was not made by Stream.EndCapture", g)
	}
	return nil
}

// Instantiate makes the executable form of g (cuGraphInstantiateWithFlags,
// no flags). g may be destroyed afterwards; the executable graph keeps
// what it needs.
func (g *Graph) Instantiate() (*GraphExec, error) {
	if err := g.usable("Graph.Instantiate"); err != nil {
		return nil, err
	}
	f := getFrame()
	defer f.release()
	if err := g.ctx.graphCall(f, "Graph.Instantiate", g.ctx.drv.graph.instantiate, g.String, f.outAddr(0), g.h, 0); err != nil {
		return nil, err
	}
	return &GraphExec{ctx: g.ctx, h: uintptr(f.out[0])}, nil
}

// Destroy frees the graph (cuGraphDestroy); destroying twice does nothing.
func (g *Graph) Destroy() error {
	if g == nil || g.destroyed {
		return nil
	}
	if err := g.usable("Graph.Destroy"); err != nil {
		return err
	}
	f := getFrame()
	defer f.release()
	if err := g.ctx.graphCall(f, "Graph.Destroy", g.ctx.drv.graph.destroy, g.String, g.h); err != nil {
		return err
	}
	g.destroyed = true
	return nil
}

// GraphExec is an instantiated graph: Launch replays it.
type GraphExec struct {
	ctx       *Context
	h         uintptr
	destroyed bool
}

func (e *GraphExec) String() string { return fmt.Sprintf("graph exec %#x", e.h) }

// made refuses a GraphExec not made by Graph.Instantiate (the zero
// value), which has no context to call the driver with.
func (e *GraphExec) made(op string) error {
	if e.ctx == nil {
		return invalidArg(op, "%s was not made by Graph.Instantiate", e)
	}
	return nil
}

// Launch queues one replay of the graph on s (cuGraphLaunch), ordered
// with s's other work like any launch; replays of one GraphExec run one
// after another.
func (e *GraphExec) Launch(s *Stream) error {
	if e == nil || e.destroyed {
		return invalidArg("GraphExec.Launch", "nil or destroyed executable graph")
	}
	if err := e.made("GraphExec.Launch"); err != nil {
		return err
	}
	sh, err := e.ctx.streamHandle("GraphExec.Launch", s)
	if err != nil {
		return err
	}
	f := getFrame()
	defer f.release()
	return e.ctx.graphCall(f, "GraphExec.Launch", e.ctx.drv.graph.launch, func() string { return fmt.Sprintf("%s on %s", e, s) }, e.h, sh)
}

// Destroy frees the executable graph once its replays have completed
// (cuGraphExecDestroy); destroying twice does nothing.
func (e *GraphExec) Destroy() error {
	if e == nil || e.destroyed {
		return nil
	}
	if err := e.made("GraphExec.Destroy"); err != nil {
		return err
	}
	f := getFrame()
	defer f.release()
	if err := e.ctx.graphCall(f, "GraphExec.Destroy", e.ctx.drv.graph.execDestroy, e.String, e.h); err != nil {
		return err
	}
	e.destroyed = true
	return nil
}
