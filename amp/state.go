package amp

import (
	"fmt"

	"github.com/strata-ml/strata/tensor"
)

// State is the autocast state of one context: whether autocast is on, the
// low-precision dtype its matrix products run in, and whether float32
// products outside autocast may use TF32 tensor cores.
type State struct {
	Enabled bool
	DType   tensor.DType // tensor.Float16 or tensor.BFloat16 when Enabled
	TF32    bool         // float32 matrix products may use TF32 (PyTorch's allow_tf32)
}

func (s State) String() string {
	switch {
	case s.Enabled:
		return fmt.Sprintf("autocast %v", s.DType)
	case s.TF32:
		return "float32 with TF32 products"
	}
	return "float32"
}

// key is amp's slot in a tensor.Ctx: the innermost open *region.
var key = tensor.NewCtxKey("amp")

// region is an open autocast region: its state and the low-precision
// copies of the weights (kept tensors) it has cast, each made once per
// region and released when the region closes (PyTorch's autocast weight
// cache).
type region struct {
	State
	cache   map[*tensor.Tensor]cast
	sweepAt int // the cache's size at which weight next drops the copies of released tensors
}

func current(c *tensor.Ctx) *region {
	if c == nil {
		c = tensor.Background()
	}
	r, _ := c.Value(key).(*region)
	return r
}

// Current is c's autocast state (float32 for a context that never
// entered a region). A nil c means tensor.Background().
func Current(c *tensor.Ctx) State {
	if r := current(c); r != nil {
		return r.State
	}
	return State{}
}

// With runs fn with c's autocast state set to s and restores the previous
// state afterwards, also when fn panics; the weight copies cast inside
// are released then (tensors that saved them for backward keep their own
// references). Regions nest; checkpointing uses With to run a
// checkpointed region's forward pass (so that its weight copies are freed
// as it returns) and to recompute it in the state its forward ran in. It panics with an
// *tensor.OpError wrapping tensor.ErrDType when s enables autocast in a
// dtype other than float16 or bfloat16, and with one wrapping
// tensor.ErrArgument when fn is nil. A nil c means tensor.Background().
func With(c *tensor.Ctx, s State, fn func()) {
	with("amp.With", c, s, fn)
}

// with is With, its errors naming op.
func with(op string, c *tensor.Ctx, s State, fn func()) {
	if fn == nil {
		panic(&tensor.OpError{Op: op, Msg: "nil fn", Err: tensor.ErrArgument})
	}
	if c == nil {
		c = tensor.Background()
	}
	if s.Enabled && s.DType != tensor.Float16 && s.DType != tensor.BFloat16 {
		panic(&tensor.OpError{Op: op, Msg: fmt.Sprintf("autocast dtype %v: want float16 or bfloat16", s.DType), Err: tensor.ErrDType})
	}
	r := &region{State: s}
	old := c.SetValue(key, r)
	defer func() {
		c.SetValue(key, old)
		for _, w := range r.cache {
			w.copy.Release()
		}
	}()
	fn()
}

// Autocast runs fn in an autocast region of c in dtype dt (tensor.Float16
// or tensor.BFloat16); see With (its errors name amp.Autocast).
func Autocast(c *tensor.Ctx, dt tensor.DType, fn func()) {
	with("amp.Autocast", c, State{Enabled: true, DType: dt}, fn)
}
