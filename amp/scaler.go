package amp

import (
	"fmt"
	"math"
	"strconv"

	"github.com/strata-ml/strata/tensor"
)

// GradScaler is dynamic loss scaling for float16 training, PyTorch's
// torch.amp.GradScaler: the loss is multiplied by Scale before backward
// so small gradients survive float16; Unscale divides the gradients by it
// again in one fused pass that also finds inf and NaN; a step with a
// non-finite gradient is skipped and the scale halved (BackoffFactor; not
// below float32's smallest normal, 2^-126), and after GrowthInterval good
// steps in a row the scale doubles (GrowthFactor; not past float32's
// largest finite number, where growth stops). The fused pass tests each
// quotient, so below a scale of 1, where dividing multiplies, a finite
// gradient that overflows is found too.
// Unscale, Record and LoadMetadata refuse a Scale outside [2^-126, max
// float32] and the settings PyTorch's GradScaler refuses (a GrowthFactor
// that is not a finite number above 1, a BackoffFactor outside (0, 1))
// or a GrowthInterval below 1, and an enabled scaler's Unscale refuses
// half-precision gradients (float16 loss scaling needs float32 ones) and
// a list with no gradient in it (a step it checked nothing of).
//
// A disabled scaler (bfloat16 and float32 need none: their exponent
// range is float32's) is a no-op: LossScale is 1, Unscale reports every
// step good without touching the gradients, so the training loop is the
// same code for every precision:
//
//	loss.BackwardWith(c.Full(dev, tensor.Float32, s.LossScale()))
//	if s.Unscale(grads) { clip; opt.Step() }
//	s.Update()
type GradScaler struct {
	Scale          float64 // current loss scale (65536 at start)
	GrowthFactor   float64 // 2
	BackoffFactor  float64 // 0.5
	GrowthInterval int     // good steps in a row before the scale grows: 2000

	enabled  bool
	good     int  // good steps since the last growth or backoff
	found    bool // the last Unscale found inf or NaN
	unscaled bool // Unscale ran since the last Update
	skipped  int  // steps skipped so far
}

// NewGradScaler returns a scaler with PyTorch's defaults, enabled or not.
func NewGradScaler(enabled bool) *GradScaler {
	return &GradScaler{Scale: 65536, GrowthFactor: 2, BackoffFactor: 0.5, GrowthInterval: 2000, enabled: enabled}
}

// ScalerFor returns the scaler training in state s needs: enabled for
// float16 autocast, disabled otherwise.
func ScalerFor(s State) *GradScaler {
	return NewGradScaler(s.Enabled && s.DType == tensor.Float16)
}

// Enabled reports whether the scaler scales.
func (s *GradScaler) Enabled() bool { return s.enabled }

// LossScale is the factor to seed backward with: Scale, or 1 when
// disabled.
func (s *GradScaler) LossScale() float64 {
	if !s.enabled {
		return 1
	}
	return s.Scale
}

// Unscale divides every gradient by the loss scale in place, in one fused
// pass (one kernel launch on a GPU for all of them) that also checks them,
// and reports whether all the unscaled gradients are finite: false means
// skip this optimizer step. Call it once per step, after backward and
// before gradient clipping; nil gradients are skipped, but an enabled
// scaler given none that is not nil panics with an *tensor.OpError
// wrapping tensor.ErrArgument and checks nothing, as PyTorch's
// GradScaler refuses a step with no inf check recorded. A disabled
// scaler returns true at once.
//
// The fused pass checks each gradient after dividing it: a non-finite
// gradient stays one, and below a scale of 1, where dividing multiplies
// (PyTorch's schedule gets there only after a long run of overflows), a
// finite gradient that overflows is found in the same pass. It panics with an *tensor.OpError wrapping
// tensor.ErrArgument, before changing any gradient, when Scale is not a
// float32 the gradients can be divided by (NaN, infinite, or outside
// [2^-126, max float32], as set in the field: its reciprocal would be 0,
// infinite or NaN in float32) or GrowthFactor, BackoffFactor or
// GrowthInterval is one LoadMetadata refuses (see GradScaler), and with
// one wrapping tensor.ErrDType when
// a gradient is not float32: float16 loss scaling needs float32
// gradients, and half gradients (nn.GPT.SetBlockGradDType) are for
// bfloat16 autocast, which needs no scaler.
func (s *GradScaler) Unscale(grads []*tensor.Tensor) bool {
	const op = "amp.GradScaler.Unscale"
	if !s.enabled {
		return true
	}
	if s.unscaled {
		panic(&tensor.OpError{Op: op, Msg: "called twice before Update", Err: tensor.ErrArgument})
	}
	s.checkSettings(op)
	checked := 0
	for i, g := range grads {
		if g == nil {
			continue
		}
		if g.DType().IsHalf() {
			panic(&tensor.OpError{Op: op, Msg: fmt.Sprintf("gradient %d is %v %v: float16 loss scaling needs float32 gradients; "+
				"half gradients are for bfloat16 autocast, which needs no scaler", i, g.DType(), g.Shape()), Err: tensor.ErrDType})
		}
		checked++
	}
	// No gradient is no inf check (PyTorch's step and update assert that
	// one was recorded): a step that checked nothing must not count as a
	// good one and grow the scale.
	if checked == 0 {
		panic(&tensor.OpError{Op: op, Msg: fmt.Sprintf("no gradients to check (%d given, all nil): did backward run?", len(grads)), Err: tensor.ErrArgument})
	}
	// UnscaleGrads tests each product: below a scale of 1, where dividing
	// multiplies, a finite gradient that overflowed is found too.
	ok := tensor.UnscaleGrads(grads, 1/s.Scale) // a panic leaves the step unchecked
	s.unscaled, s.found = true, !ok
	return ok
}

// checkSettings panics with an *tensor.OpError wrapping
// tensor.ErrArgument when Scale is not in [2^-126, max float32] (NaN
// included): the scales whose reciprocal, and the scale itself, are
// finite and non-zero in float32; or when a factor or the interval is
// one LoadMetadata refuses: Update would then never back off (a
// BackoffFactor of 1), drop to the smallest scale at once (0), grow after
// every step (a GrowthInterval of 0) or shrink when it should grow.
func (s *GradScaler) checkSettings(op string) {
	var msg string
	switch {
	case !(s.Scale >= minScale && s.Scale <= math.MaxFloat32):
		msg = fmt.Sprintf("Scale = %v: want a float32 scale in [2^-126, %v]", s.Scale, math.MaxFloat32)
	case !(s.GrowthFactor > 1) || math.IsInf(s.GrowthFactor, 1):
		msg = fmt.Sprintf("GrowthFactor = %v: want a finite number above 1", s.GrowthFactor)
	case !(s.BackoffFactor > 0 && s.BackoffFactor < 1):
		msg = fmt.Sprintf("BackoffFactor = %v: want a number in (0, 1)", s.BackoffFactor)
	case s.GrowthInterval < 1:
		msg = fmt.Sprintf("GrowthInterval = %d: want at least 1", s.GrowthInterval)
	default:
		return
	}
	panic(&tensor.OpError{Op: op, Msg: msg, Err: tensor.ErrArgument})
}

// Record notes the outcome of a step whose unscale ran elsewhere (on the
// device, in a captured CUDA graph: tensor.StepGuard.Unscale with the
// factor 1/LossScale): found says a gradient was not finite, so the step
// was skipped. Call it in place of Unscale, once per step, then Update. A
// disabled scaler ignores it. A Scale or setting Unscale would refuse is
// refused here too (the step it seeded and unscaled is not one to count).
func (s *GradScaler) Record(found bool) {
	const op = "amp.GradScaler.Record"
	if !s.enabled {
		return
	}
	if s.unscaled {
		panic(&tensor.OpError{Op: op, Msg: "called twice, or after Unscale, before Update", Err: tensor.ErrArgument})
	}
	s.checkSettings(op)
	s.unscaled, s.found = true, found
}

// Update ends the step: after a skipped step the scale backs off, after
// GrowthInterval good steps in a row it grows, up to float32's largest
// finite number. A disabled scaler does
// nothing. It panics with an *tensor.OpError wrapping tensor.ErrArgument
// when no Unscale or Record checked the step since the last Update (as
// PyTorch's update asserts that an inf check was recorded): an unchecked
// step is not a good one.
func (s *GradScaler) Update() {
	if !s.enabled {
		return
	}
	if !s.unscaled {
		panic(&tensor.OpError{Op: "amp.GradScaler.Update", Msg: "no Unscale or Record since the last Update", Err: tensor.ErrArgument})
	}
	s.unscaled = false
	if s.found {
		// Not below float32's smallest normal: a scale that reached 0
		// would zero every gradient (steps of nothing, counted as good)
		// and could not be loaded again.
		s.Scale = max(s.Scale*s.BackoffFactor, minScale)
		s.good = 0
		s.skipped++
		s.found = false
		return
	}
	s.good++
	if s.good >= s.GrowthInterval {
		// Not above float32's largest: LossScale seeds backward in
		// float32, where a larger scale is +Inf.
		if grown := s.Scale * s.GrowthFactor; grown <= math.MaxFloat32 {
			s.Scale = grown
		}
		s.good = 0
	}
}

// minScale is the smallest scale Update backs off to: float32's smallest
// normal number.
const minScale = 0x1p-126

// AbortStep forgets a step that failed with an error (out of memory, a
// device error) after Unscale and before Update: the scale and the counts
// stay as they were, and the next Unscale starts a new step. A step that
// merely overflowed is not an error: Update handles it.
func (s *GradScaler) AbortStep() {
	s.unscaled, s.found = false, false
}

// Skipped is the number of steps skipped for non-finite gradients.
func (s *GradScaler) Skipped() int { return s.skipped }

// Metadata returns the scaler's state as safetensors metadata entries
// (saved with the weights), or nil when disabled.
func (s *GradScaler) Metadata() map[string]string {
	if !s.enabled {
		return nil
	}
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	return map[string]string{
		"amp.scale": f(s.Scale), "amp.growth_factor": f(s.GrowthFactor), "amp.backoff_factor": f(s.BackoffFactor),
		"amp.growth_interval": strconv.Itoa(s.GrowthInterval), "amp.good_steps": strconv.Itoa(s.good),
		"amp.skipped": strconv.Itoa(s.skipped),
	}
}

// LoadMetadata restores the state Metadata saved; entries that are absent
// keep their values. A malformed entry is an error naming it, and leaves
// the scaler unchanged: the scale must be one float32 can use, in
// [2^-126, max float32] (what Unscale accepts), the factors finite and
// positive (GrowthFactor above 1 and BackoffFactor below 1, as PyTorch's
// GradScaler requires), GrowthInterval at least 1, the counts not
// negative.
func (s *GradScaler) LoadMetadata(md map[string]string) error {
	c := *s
	floats := []struct {
		key    string
		p      *float64
		ok     func(float64) bool
		wanted string
	}{
		{"amp.scale", &c.Scale, func(x float64) bool { return x >= minScale && x <= math.MaxFloat32 },
			fmt.Sprintf("a number in [2^-126, %v] (float32's normal range)", math.MaxFloat32)},
		{"amp.growth_factor", &c.GrowthFactor, func(x float64) bool { return x > 1 }, "a finite number above 1"},
		{"amp.backoff_factor", &c.BackoffFactor, func(x float64) bool { return x > 0 && x < 1 }, "a number in (0, 1)"},
	}
	for _, f := range floats {
		if v, ok := md[f.key]; ok {
			x, err := strconv.ParseFloat(v, 64)
			if err != nil || !f.ok(x) || math.IsInf(x, 0) {
				return fmt.Errorf("amp: GradScaler metadata %s = %q: want %s", f.key, v, f.wanted)
			}
			*f.p = x
		}
	}
	ints := []struct {
		key string
		p   *int
		min int
	}{{"amp.growth_interval", &c.GrowthInterval, 1}, {"amp.good_steps", &c.good, 0}, {"amp.skipped", &c.skipped, 0}}
	for _, f := range ints {
		if v, ok := md[f.key]; ok {
			x, err := strconv.Atoi(v)
			if err != nil || x < f.min {
				return fmt.Errorf("amp: GradScaler metadata %s = %q: want an integer of at least %d", f.key, v, f.min)
			}
			*f.p = x
		}
	}
	*s = c
	return nil
}
