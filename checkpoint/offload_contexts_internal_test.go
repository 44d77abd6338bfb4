package checkpoint

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/tensor"
)

// TestOffloadForgetsContextsWithoutBackward: forward passes in contexts
// that never run backward (a validation pass with recording on, each
// request in a context of its own) do not stay in a shared Offload's
// records. Before session 40 (a reviewer helper found it) only the
// calling context's records were pruned, so every such context stayed
// in the map, with its released tensors, for the life of the model.
func TestOffloadForgetsContextsWithoutBackward(t *testing.T) {
	p, off, o := offloadFixture(t)
	for range 100 {
		c := tensor.NewCtx()
		c.WithScope(func() {
			x := autograd.Const(c.Ones(tensor.CPU(), tensor.Float32, 2, 4))
			_ = o.Apply(func(in ...*autograd.Var) *autograd.Var { return autograd.Linear(in[0], p, nil) }, x)
		})
	}
	off.mu.Lock()
	n := len(off.live)
	off.mu.Unlock()
	require.LessOrEqual(t, n, 1, "contexts whose passes never ran backward are forgotten")
}

// offloadFixture is the offload tests' 4x4 parameter (released at the
// test's end), a fresh Offload and Options that use it.
func offloadFixture(t *testing.T) (*autograd.Var, *Offload, Options) {
	w, err := tensor.NewKept(tensor.CPU(), tensor.Float32, memory.RoleParameter, 4, 4)
	require.NoError(t, err)
	t.Cleanup(w.Release)
	off := &Offload{}
	return autograd.Param(w, "w"), off, Options{Offload: off}
}

// liveRegions is how many of c's regions o keeps a record of.
func (o *Offload) liveRegions(c *tensor.Ctx) int {
	if r := o.live[c]; r != nil {
		return len(r.rs)
	}
	return 0
}
