package autograd_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/tensor"
)

// TestLinearCrossEntropyOnKeptTensorsTakesTheTargetsContext: h and w
// kept (parameters, or a chain of ops on parameters alone) meet the
// caller's data at the head in its targets, and the head's output belongs
// to the targets' context, where Record decides whether to record. The
// head decided from h and w alone (Background), so under NoGradIn of the
// caller's context it still made the gradients, and with recording on it
// allocated the gradient of h in Background, outside the caller's scope:
// 24 bytes left allocated after the scope closed, in both cases, until
// the garbage collector's safety net.
func TestLinearCrossEntropyOnKeptTensorsTakesTheTargetsContext(t *testing.T) {
	cpu := tensor.CPU()
	m := cpu.Memory()
	h := autograd.Param(tensor.FromFloat32s(cpu, []float32{1, 2, 3, 4, 5, 6}, 2, 3), "h")
	w := autograd.Param(tensor.FromFloat32s(cpu, []float32{1, 2, 3, 4, 5, 6, 0, 0, 1}, 3, 3), "w")
	defer done(h, w)
	for _, grad := range []bool{true, false} {
		before := m.Stats().Total.Requested.Current
		c := tensor.NewCtx()
		c.WithScope(func() {
			tgt := c.FromInt32s(cpu, []int32{0, 2}, 2)
			f := func() {
				l := autograd.LinearCrossEntropy(h, w, tgt, 1)
				assert.Equal(t, grad, l.RequiresGrad())
				assert.InDelta(t, 44.5, l.Item(), 1e-5)
			}
			if grad {
				f() // recorded, never differentiated (evaluation with recording on)
			} else {
				autograd.NoGradIn(c, f)
			}
		})
		assert.Equal(t, before, m.Stats().Total.Requested.Current, "grad %v: bytes left allocated after the scope", grad)
	}
}
