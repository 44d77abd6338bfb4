package autograd

import (
	"errors"
	"fmt"
	"runtime"
	"strings"

	"github.com/strata-ml/strata/tensor"
)

// ErrNaN: with anomaly detection on (DetectAnomalyIn), a backward
// returned a gradient holding a NaN. Backward fails with an
// *tensor.OpError wrapping it that names the op, the input and where the
// op was recorded: torch.autograd.detect_anomaly's "Function ... returned
// nan values". Infinities pass, as there (an fp16 gradient that
// overflows is the gradient scaler's to handle, amp.GradScaler).
var ErrNaN = errors.New("autograd: a backward returned a gradient with a NaN")

// DetectAnomalyIn runs fn with anomaly detection on in context c:
// torch.autograd.set_detect_anomaly(True). Ops recorded inside note the
// calls that led to them (a few frames of the stack outside this
// package), and a Backward that starts inside checks every gradient a
// backward returns: the first that holds a NaN fails the pass with
// ErrNaN, naming the op, the input it was for and the recording's frames,
// before it reaches any other op. The check costs a
// reduction and, on a GPU, a wait for the device per gradient: a mode
// for finding where a NaN comes from, not for training. Modes nest; other
// contexts are not affected. A nil fn panics with an *tensor.OpError
// wrapping tensor.ErrArgument.
func DetectAnomalyIn(c *tensor.Ctx, fn func()) {
	if fn == nil {
		panic(&tensor.OpError{Op: "autograd.DetectAnomaly", Msg: "nil fn", Err: tensor.ErrArgument})
	}
	st := stateOf(c)
	st.anomaly.Add(1)
	defer st.anomaly.Add(-1)
	fn()
}

// DetectAnomaly is DetectAnomalyIn(tensor.Background(), fn).
func DetectAnomaly(fn func()) { DetectAnomalyIn(tensor.Background(), fn) }

// AnomalyDetectionIn reports whether anomaly detection is on in c.
func AnomalyDetectionIn(c *tensor.Ctx) bool { return stateOf(c).anomaly.Load() > 0 }

// recordSite notes on n, when anomaly detection is on in c, the calls
// that recorded it.
func recordSite(n *node, c *tensor.Ctx) {
	if !AnomalyDetectionIn(c) {
		return
	}
	pcs := make([]uintptr, 32)
	n.site = pcs[:runtime.Callers(3, pcs)]
}

// siteFrames formats the frames of pcs outside this package, at most
// maxSiteFrames of them, one "function (file:line)" a line.
func siteFrames(pcs []uintptr) string {
	const maxSiteFrames = 6
	var b strings.Builder
	frames := runtime.CallersFrames(pcs)
	n := 0
	for {
		f, more := frames.Next()
		if !strings.HasPrefix(f.Function, "github.com/strata-ml/strata/autograd.") && f.Function != "" {
			fmt.Fprintf(&b, "\n\t%s (%s:%d)", f.Function, f.File, f.Line)
			if n++; n == maxSiteFrames {
				break
			}
		}
		if !more {
			break
		}
	}
	return b.String()
}

// checkNaN panics with an *tensor.OpError wrapping ErrNaN when a
// gradient n's backward returned for an input that takes it holds a NaN
// (grads passed checkGrads), releasing grads but g, the output gradient,
// as checkGrads does.
func checkNaN(n *node, g *tensor.Tensor, grads []*tensor.Tensor) {
	for i, in := range n.inputs {
		gi := grads[i]
		if in == nil || !in.requiresGrad || gi == nil || !tensor.HasNaN(gi) {
			continue
		}
		where := " (recorded without anomaly detection on: run the forward inside DetectAnomalyIn too to see where)"
		if n.site != nil {
			where = ", recorded at:" + siteFrames(n.site)
		}
		for _, r := range grads {
			if r != g {
				r.Release()
			}
		}
		panic(&tensor.OpError{Op: "autograd.Backward", Err: ErrNaN,
			Msg: fmt.Sprintf("backward of %s returned a NaN in the gradient of input %d (%s)%s", n.op, i, varName(in), where)})
	}
}
