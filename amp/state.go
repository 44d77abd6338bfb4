package amp

import (
	"fmt"

	"github.com/strata-ml/strata/tensor"
)

// State is the autocast state of one context: whether autocast is on and
// the low-precision dtype its matrix products run in.
type State struct {
	Enabled bool
	DType   tensor.DType // tensor.Float16 or tensor.BFloat16 when Enabled
}

func (s State) String() string {
	if !s.Enabled {
		return "autocast off"
	}
	return fmt.Sprintf("autocast %v", s.DType)
}

// key is amp's slot in a tensor.Ctx: a *State.
var key = tensor.NewCtxKey("amp")

// Current is c's autocast state (off for a context that never entered an
// autocast region). A nil c means tensor.Background().
func Current(c *tensor.Ctx) State {
	if c == nil {
		c = tensor.Background()
	}
	if s, ok := c.Value(key).(*State); ok {
		return *s
	}
	return State{}
}

// With runs fn with c's autocast state set to s and restores the previous
// state afterwards, also when fn panics. Regions nest; checkpointing uses
// With to recompute a region in the state its forward ran in.
func With(c *tensor.Ctx, s State, fn func()) {
	if c == nil {
		c = tensor.Background()
	}
	if s.Enabled && s.DType != tensor.Float16 && s.DType != tensor.BFloat16 {
		panic(&tensor.OpError{Op: "amp.With", Msg: fmt.Sprintf("autocast dtype %v: want float16 or bfloat16", s.DType), Err: tensor.ErrDType})
	}
	st := s
	old := c.SetValue(key, &st)
	defer c.SetValue(key, old)
	fn()
}

// Autocast runs fn in an autocast region of c in dtype dt (tensor.Float16
// or tensor.BFloat16); it panics with an *tensor.OpError wrapping
// tensor.ErrDType for any other dtype.
func Autocast(c *tensor.Ctx, dt tensor.DType, fn func()) {
	With(c, State{Enabled: true, DType: dt}, fn)
}
