package cuda

import "fmt"

// cuStreamCreate flag: do not synchronise with the legacy default stream.
const streamNonBlocking = 0x1

// Stream is a CUDA stream of one context. A nil *Stream, wherever a stream
// is taken, means the context's legacy default stream (handle 0), which
// the non-blocking streams made by NewStream do not wait for. Its methods
// may run concurrently, except Destroy, which must not race with any other
// use of the stream (the destroyed mark is not synchronised).
type Stream struct {
	ctx       *Context
	h         uintptr
	destroyed bool
}

// NewStream creates a stream that does not synchronise with the legacy
// default stream (CU_STREAM_NON_BLOCKING).
func (c *Context) NewStream() (*Stream, error) {
	f := getFrame()
	defer f.release()
	if s := c.invoke(f, c.drv.streamCreate, f.outAddr(0), streamNonBlocking); !s.ok() {
		return nil, s.err(c.dev.String())
	}
	return &Stream{ctx: c, h: uintptr(f.out[0])}, nil
}

// StreamPriority is a stream's scheduling priority: when kernels of
// several streams wait for the GPU, the blocks of the higher priority go
// first (running blocks are not preempted).
type StreamPriority int

const (
	// PriorityLow is the default streams' priority: the least.
	PriorityLow StreamPriority = iota
	// PriorityHigh is one level under the greatest (the greatest where
	// the device has two levels or fewer): above every default stream,
	// and below PriorityHighest, which is left for short work that must
	// start at once beside it (tensor's side stream).
	PriorityHigh
	// PriorityHighest is the greatest priority the context offers.
	PriorityHighest
)

// NewStreamPriority is NewStream at a priority: PriorityLow, which
// streams made by NewStream have, PriorityHigh or PriorityHighest (where
// the device has fewer levels, the nearest it has).
func (c *Context) NewStreamPriority(p StreamPriority) (*Stream, error) {
	if p < PriorityLow || p > PriorityHighest {
		// priorityLevel would make any other value the least priority.
		return nil, invalidArg("NewStreamPriority", "unknown priority %d: use PriorityLow, PriorityHigh or PriorityHighest", int(p))
	}
	f := getFrame()
	defer f.release()
	if s := c.invoke(f, c.drv.ctxGetStreamPriorityRange, f.outAddr(0), f.outAddr(1)); !s.ok() {
		return nil, s.err(c.dev.String())
	}
	prio := priorityLevel(p, f.out32(0), f.out32(1))
	if s := c.invoke(f, c.drv.streamCreateWithPriority, f.outAddr(0), streamNonBlocking, uintptr(int64(prio))); !s.ok() {
		return nil, s.err(c.dev.String())
	}
	return &Stream{ctx: c, h: uintptr(f.out[0])}, nil
}

// priorityLevel is p's level in a context whose levels run from least to
// greatest (CUDA's: greatest is the smaller number, -5 to 0 on an H200).
func priorityLevel(p StreamPriority, least, greatest int32) int32 {
	switch p {
	case PriorityHighest:
		return greatest
	case PriorityHigh:
		if least-greatest >= 2 {
			return greatest + 1
		}
		return greatest
	}
	return least
}

// Handle returns the CUstream (0 for a nil *Stream).
func (s *Stream) Handle() uintptr {
	if s == nil {
		return 0
	}
	return s.h
}

// Context returns the stream's context.
func (s *Stream) Context() *Context { return s.ctx }

func (s *Stream) String() string {
	if s == nil {
		return "default stream"
	}
	return fmt.Sprintf("stream %#x", s.h)
}

// streamHandle validates that s may be used with c and returns its handle.
func (c *Context) streamHandle(op string, s *Stream) (uintptr, error) {
	if s == nil {
		return 0, nil
	}
	if err := s.usable(op); err != nil {
		return 0, err
	}
	if s.ctx != c {
		return 0, invalidArg(op, "%s belongs to %s, not %s", s, s.ctx.dev, c.dev)
	}
	return s.h, nil
}

// Synchronize blocks until all work queued on the stream has finished.
func (s *Stream) Synchronize() error {
	if err := s.usable("Stream.Synchronize"); err != nil {
		return err
	}
	f := getFrame()
	defer f.release()
	if st := s.ctx.invoke(f, s.ctx.drv.streamSynchronize, s.h); !st.ok() {
		return st.err(s.String())
	}
	return nil
}

// Query reports whether all work queued on the stream has finished,
// without blocking.
func (s *Stream) Query() (bool, error) {
	if err := s.usable("Stream.Query"); err != nil {
		return false, err
	}
	f := getFrame()
	defer f.release()
	st := s.ctx.invoke(f, s.ctx.drv.streamQuery, s.h)
	switch st.code {
	case cudaSuccess:
		return true, nil
	case cudaErrorNotReady:
		return false, nil
	}
	return false, st.err(s.String())
}

// WaitEvent makes all work queued on the stream after this call wait
// until e has completed; the host does not block.
func (s *Stream) WaitEvent(e *Event) error {
	if err := s.usable("Stream.WaitEvent"); err != nil {
		return err
	}
	if err := e.usable("Stream.WaitEvent"); err != nil {
		return err
	}
	f := getFrame()
	defer f.release()
	if st := s.ctx.invoke(f, s.ctx.drv.streamWaitEvent, s.h, e.h, 0); !st.ok() {
		return st.err(s.String())
	}
	return nil
}

// Destroy releases the stream once its queued work completes. Destroying
// a destroyed stream is a no-op.
func (s *Stream) Destroy() error {
	if s == nil {
		return invalidArg("Stream.Destroy", "the default stream cannot be destroyed")
	}
	if s.destroyed {
		return nil
	}
	if err := s.usable("Stream.Destroy"); err != nil {
		return err
	}
	f := getFrame()
	defer f.release()
	if st := s.ctx.invoke(f, s.ctx.drv.streamDestroy, s.h); !st.ok() {
		return st.err(s.String())
	}
	s.destroyed = true
	return nil
}

// boundStream checks s, the stream a cuBLAS or cuBLASLt handle was bound
// to by SetStream, before work is queued on it: a stream destroyed since
// is a dangling CUstream (possibly reused by a newer stream), refused.
func boundStream(op string, s *Stream) error {
	if s != nil && s.destroyed {
		return invalidArg(op, "the handle's %s was destroyed: call SetStream with a live stream", s)
	}
	return nil
}

func (s *Stream) usable(op string) error {
	if s == nil {
		return invalidArg(op, "nil stream: use Context.Synchronize for the default stream")
	}
	if s.destroyed {
		return invalidArg(op, "%s was destroyed", s)
	}
	if s.ctx == nil {
		return invalidArg(op, "%s was not made by NewStream", s)
	}
	return nil
}
