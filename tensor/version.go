package tensor

// Version counters, PyTorch's: every storage counts the writes made to it
// in place, and a tensor reports its storage's count, so that views share
// it. autograd records the versions of what a backward will read (saved
// tensors, and the inputs or outputs an op's backward uses) and refuses to
// differentiate through values changed since (autograd.ErrModified), where
// it would otherwise give the gradient at the changed values in silence.
//
// Every function of this package that writes into a tensor it did not
// make counts a write: Fill, AddInPlace, ScaleInPlace, CausalMaskInPlace,
// CopyFrom, WriteNarrow, MatMulInto, EmbeddingBackwardInto, the
// optimizers' steps (their parameters and moments), ScaleAll and
// UnscaleGrads. A write the package does not make (a kernel of the
// caller's through CUDAPointer, a collective of dist's) is counted by
// MarkModified; a write inside a CUDA graph's capture is counted again at
// each replay (Graph.Launch). The guarded step's gradient writes
// (StepGuard.Unscale and ClipGradNorm) count too. A count is one atomic
// add, beside a kernel launch.

// Version is the number of in-place writes made to t's storage so far (by
// t or any view of it): torch.Tensor._version. It is 0 for a tensor that
// was never written in place, and it may be read after t was released.
func (t *Tensor) Version() uint64 { return t.ref.st.version.Load() }

// MarkModified counts a write to t's storage that this package did not
// make (a kernel launched through CUDAPointer, say), as the package's own
// in-place ops do: a backward that reads t's storage and was recorded
// before then fails instead of using the new values. It panics with an
// *OpError wrapping ErrReleased on a released t.
func (t *Tensor) MarkModified() {
	t.live("MarkModified")
	modified(t) // and noted by a CUDA graph's capture in progress
}

// modified counts a write to each non-nil tensor of ts (a nil one is an
// absent optional buffer). During a CUDA graph's capture it also notes the
// storage, so that each of the graph's replays counts a write there too
// (Graph.Launch).
func modified(ts ...*Tensor) {
	for _, t := range ts {
		if t == nil {
			continue
		}
		t.ref.st.version.Add(1)
		if capturing.Load() != 0 {
			noteCapturedWrite(t)
		}
	}
}

// noteCapturedWrite records t's storage as written by the capture in
// progress on its device, if any.
func noteCapturedWrite(t *Tensor) {
	d, ok := t.dev.(*cudaDevice)
	if !ok {
		return
	}
	c := d.capturing()
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.written == nil {
		c.written = map[*storage]bool{}
	}
	c.written[t.ref.st] = true
}
