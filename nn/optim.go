package nn

import (
	"fmt"
	"math"

	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/tensor"
)

// Optimizer updates parameters from their gradients.
type Optimizer interface {
	// Step applies one update to every parameter that has a gradient.
	Step() error
	// SetLR changes the learning rate (for schedules).
	SetLR(lr float64)
	// Release frees the optimizer's state.
	Release()
}

// AdamW is PyTorch's torch.optim.AdamW (decoupled weight decay), applied
// to parameters with Decay set; others get weight decay 0 (nanoGPT's
// grouping). Moments are allocated on first use with role optimizer.
type AdamW struct {
	Params                []*Parameter
	LR, Beta1, Beta2, Eps float64
	WeightDecay           float64
	step                  int
	m, v                  map[*Parameter]*tensor.Tensor
}

// NewAdamW returns AdamW with PyTorch's defaults for the betas and eps.
func NewAdamW(ps []*Parameter, lr, weightDecay float64) *AdamW {
	return &AdamW{Params: ps, LR: lr, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: weightDecay,
		m: map[*Parameter]*tensor.Tensor{}, v: map[*Parameter]*tensor.Tensor{}}
}

// SetLR sets the learning rate.
func (o *AdamW) SetLR(lr float64) { o.LR = lr }

// Steps is the number of steps taken.
func (o *AdamW) Steps() int { return o.step }

// Step updates every parameter with a gradient. The moments a first step
// needs are allocated before any parameter changes, so a step that runs
// out of memory leaves the parameters and the step count as they were.
func (o *AdamW) Step() error {
	return tensor.Try(func() {
		for _, p := range o.Params {
			if p.Grad != nil && p.RequiresGrad() {
				o.state(p)
			}
		}
		o.step++
		for _, p := range o.Params {
			if p.Grad == nil || !p.RequiresGrad() {
				continue
			}
			m, v := o.state(p)
			wd := 0.0
			if p.Decay {
				wd = o.WeightDecay
			}
			tensor.AdamWStep(p.Value, p.Grad, m, v, o.LR, o.Beta1, o.Beta2, o.Eps, wd, o.step)
		}
	})
}

func (o *AdamW) state(p *Parameter) (m, v *tensor.Tensor) {
	if m, ok := o.m[p]; ok {
		return m, o.v[p]
	}
	m = zerosKept(p.Value)
	defer func() {
		if v == nil { // the second allocation failed (a panic): free the first
			m.Release()
		}
	}()
	v = zerosKept(p.Value)
	o.m[p], o.v[p] = m, v
	return m, v
}

// zerosKept allocates optimizer state like t, outside every scope.
func zerosKept(t *tensor.Tensor) *tensor.Tensor {
	z, err := tensor.NewKept(t.Device(), t.DType(), memory.RoleOptimizerState, t.Shape()...)
	if err != nil {
		panic(err)
	}
	z.Fill(0)
	return z
}

// Release frees the moment buffers.
func (o *AdamW) Release() {
	for _, m := range []map[*Parameter]*tensor.Tensor{o.m, o.v} {
		for p, t := range m {
			t.Release()
			delete(m, p)
		}
	}
}

// SGD is torch.optim.SGD with momentum, weight decay and Nesterov.
type SGD struct {
	Params                    []*Parameter
	LR, Momentum, WeightDecay float64
	Nesterov                  bool
	buf                       map[*Parameter]*tensor.Tensor
}

// NewSGD returns plain SGD with the given momentum.
func NewSGD(ps []*Parameter, lr, momentum float64) *SGD {
	return &SGD{Params: ps, LR: lr, Momentum: momentum, buf: map[*Parameter]*tensor.Tensor{}}
}

// SetLR sets the learning rate.
func (o *SGD) SetLR(lr float64) { o.LR = lr }

// Step updates every parameter with a gradient.
func (o *SGD) Step() error {
	if o.Nesterov && o.Momentum == 0 {
		return fmt.Errorf("nn: SGD: Nesterov needs momentum > 0")
	}
	return tensor.Try(func() {
		for _, p := range o.Params {
			if p.Grad == nil || !p.RequiresGrad() {
				continue
			}
			var buf *tensor.Tensor
			if o.Momentum != 0 {
				if buf = o.buf[p]; buf == nil {
					buf = zerosKept(p.Value)
					o.buf[p] = buf
				}
			}
			tensor.SGDStep(p.Value, p.Grad, buf, o.LR, o.Momentum, o.WeightDecay, o.Nesterov)
		}
	})
}

// Release frees the momentum buffers.
func (o *SGD) Release() {
	for p, t := range o.buf {
		t.Release()
		delete(o.buf, p)
	}
}

// ClipGradNorm scales all gradients so that their joint L2 norm is at
// most maxNorm, as torch.nn.utils.clip_grad_norm_ (scale maxNorm/(n+1e-6)
// applied only when it is below 1). It returns the norm before clipping.
func ClipGradNorm(ps []*Parameter, maxNorm float64) (float64, error) {
	var total float64
	err := tensor.Try(func() {
		for _, p := range ps {
			if p.Grad != nil {
				total += tensor.SumSquares(p.Grad)
			}
		}
		total = math.Sqrt(total)
		if c := maxNorm / (total + 1e-6); c < 1 {
			for _, p := range ps {
				if p.Grad != nil {
					p.Grad.ScaleInPlace(c)
				}
			}
		}
	})
	return total, err
}

// CosineSchedule is linear warm-up to MaxLR over Warmup steps, then cosine
// decay to MinLR at step Total (and MinLR after it), as nanoGPT.
type CosineSchedule struct {
	Warmup, Total int
	MaxLR, MinLR  float64
}

// LR is the learning rate at 0-based step it.
func (s CosineSchedule) LR(it int) float64 {
	if it < s.Warmup {
		return s.MaxLR * float64(it+1) / float64(s.Warmup+1)
	}
	if it >= s.Total {
		return s.MinLR
	}
	r := float64(it-s.Warmup) / float64(max(1, s.Total-s.Warmup))
	return s.MinLR + 0.5*(1+math.Cos(math.Pi*r))*(s.MaxLR-s.MinLR)
}
