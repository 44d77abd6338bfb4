package memory

// StreamEvent is a token for the work queued on a stream up to some point,
// handed out by a StreamSync. Its meaning belongs to the StreamSync (an
// index into a table of CUDA events, for the CUDA one).
type StreamEvent uintptr

// StreamSync tells a Pool when work queued on a stream has finished, so
// that a block used on streams other than its own (Pool.RecordStream) is
// not handed out again while that work may still read or write it: the
// record_stream protocol of PyTorch's caching allocator. Pools treat
// streams as opaque numbers; only the StreamSync knows what they are.
// Pools without one (the host) never pay for any of this.
//
// A pool calls these methods with its mutex held, and only for blocks that
// had RecordStream called on them, so they must not call back into the
// pool. Implementations must be safe for use by several pools at once (a
// Manager's pools share one StreamSync).
type StreamSync interface {
	// RecordEvent marks the work queued on stream s so far and returns a
	// token for it. Events recorded on one stream complete in the order
	// they were recorded; the pool relies on it to query only the oldest
	// pending event of each stream.
	RecordEvent(s Stream) (StreamEvent, error)
	// Done reports, without blocking, whether the marked work has
	// finished. When the answer cannot be had (a broken device), it
	// reports false: memory that may be in use is never reused.
	Done(ev StreamEvent) bool
	// Wait blocks until the marked work has finished. Pools call it only
	// when they would otherwise fail: before reporting out of memory, in
	// EmptyCache and in Close.
	Wait(ev StreamEvent) error
	// Release gives back the token's resources. The pool calls it exactly
	// once per token, after Done or Wait reported it finished, or at Close.
	Release(ev StreamEvent)
}

// StreamWaiter is implemented by a StreamSync that can make a stream wait
// for an event on the device, without the host waiting (cuStreamWaitEvent).
// A pool at its limit then reuses a block still pending on another
// stream's work by making the allocating stream wait for that work
// (Pool.reclaimOnStream): the host goes on queueing, and the device waits
// only as long as the other stream's work (a copy) still runs.
type StreamWaiter interface {
	// WaitOnStream makes work queued on s from now on wait for ev.
	WaitOnStream(s Stream, ev StreamEvent) error
}

// StreamHolder is implemented by a StreamSync that can hold streams:
// while Held(s) reports true, EmptyCache, the retry before an
// out-of-memory error and an expandable pool's page stealing leave the
// segments of stream s alone, free blocks and all. A captured CUDA graph's private pool is such a stream
// (CUDAStreams.Private; tensor.CaptureGraph): its replays write the blocks
// that were freed during capture, which the pool sees as free cache.
type StreamHolder interface {
	Held(s Stream) bool
}

// holder returns the pool's StreamHolder, or nil.
func (p *Pool) holder() StreamHolder {
	h, _ := p.sync.(StreamHolder)
	return h
}

// heldBy reports whether h (nil: none) holds stream s.
func heldBy(h StreamHolder, s Stream) bool { return h != nil && h.Held(s) }
