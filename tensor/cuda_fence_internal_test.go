package tensor

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/cuda"
)

// A storage may still carry a fence (an overlapped or pipelined update's,
// or MoveTo's) when a graph capture begins: nothing but the fence's
// first user clears it, and moments are used only by the optimizer.
// CaptureGraph has synchronized every stream, so the fence's work is
// over; its first user inside the capture (AdamWStepsGuarded reading the
// moments, say) must not make the capturing stream wait on the event,
// which was recorded outside the capture: CUDA refuses a wait on a
// non-captured event from a capturing stream (without
// CU_EVENT_WAIT_EXTERNAL), which would fail the capture. The fake device
// has no stream: a wait queued here fails too.
func TestJoinFenceInCapture(t *testing.T) {
	d, _, _ := fakeCUDADevice(t)
	WithScope(func() {
		x := mustNew("t", nil, d, Float32, []int{4})
		x.ref.st.fence.Store(&sideFence{d: d, ev: &cuda.Event{}})
		d.capture.Store(&cudaCapture{})
		defer d.capture.Store(nil)
		require.NotPanics(t, func() { _ = devPtr(x) }, "joining a fence during a capture")
		require.Nil(t, x.ref.st.fence.Load(), "the fence is cleared")
	})
}
