package nn_test

import (
	"context"
	"math"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/nn"
	"github.com/strata-ml/strata/tensor"
)

// setGrad gives p the gradient g (a kept float64 tensor).
func setGrad(p *nn.Parameter, g []float64) {
	p.ZeroGrad()
	t := tensor.FromFloat64s(tensor.CPU(), g, p.Value.Shape()...)
	tensor.Keep(t)
	p.Grad = t
}

func f64Param(name string, vals []float64, shape ...int) *nn.Parameter {
	l := nn.Must(nn.NewLinear(nn.Options{DType: tensor.Float64}, name, shape[1], shape[0], false, 0.02))
	l.Weight.Value.CopyFrom(tensor.FromFloat64s(tensor.CPU(), vals, shape...))
	return l.Weight
}

// twoParams makes the float64 parameters a and b of the AdamW step tests
// and an AdamW over them (lr 0.1, weight decay 0.1), released when the
// test ends.
func twoParams(t *testing.T) (a, b *nn.Parameter, ps []*nn.Parameter, opt *nn.AdamW) {
	a = f64Param("a", []float64{0.5, -1, 2, 0.25}, 2, 2)
	b = f64Param("b", []float64{1, 2, -3, 4}, 2, 2)
	ps = []*nn.Parameter{a, b}
	opt = nn.NewAdamW(ps, 0.1, 0.1)
	t.Cleanup(func() {
		opt.Release()
		nn.Release(ps)
	})
	return a, b, ps, opt
}

// adamRef is torch.optim.AdamW for one parameter with its own step count.
type adamRef struct {
	m, v []float64
	step int
}

func (r *adamRef) update(p, g []float64, lr, b1, b2, eps, wd float64) {
	if r.m == nil {
		r.m, r.v = make([]float64, len(p)), make([]float64, len(p))
	}
	r.step++
	bc1 := 1 - math.Pow(b1, float64(r.step))
	bc2 := 1 - math.Pow(b2, float64(r.step))
	for i := range p {
		p[i] *= 1 - lr*wd
		r.m[i] = b1*r.m[i] + (1-b1)*g[i]
		r.v[i] = b2*r.v[i] + (1-b2)*g[i]*g[i]
		p[i] -= lr / bc1 * r.m[i] / (math.Sqrt(r.v[i])/math.Sqrt(bc2) + eps)
	}
}

// TestAdamWStepPerParameter: as in PyTorch, each parameter counts its own
// updates, so one that first gets a gradient at the second step is
// bias-corrected as at step 1; a training state file keeps the counts.
func TestAdamWStepPerParameter(t *testing.T) {
	tensor.WithScope(func() {
		a, b, ps, opt := twoParams(t)
		pa, pb := a.Value.Float64s(), b.Value.Float64s()
		var ra, rb adamRef
		grads := [][]float64{{0.1, -0.2, 0.3, 1e-3}, {-0.5, 0.7, 0.01, 2}, {0.3, 0.3, -0.3, 0.1}}
		for s, g := range grads {
			setGrad(a, g)
			ra.update(pa, g, 0.1, 0.9, 0.999, 1e-8, 0.1)
			if s > 0 { // b gets its first gradient at the second step
				setGrad(b, g)
				rb.update(pb, g, 0.1, 0.9, 0.999, 1e-8, 0.1)
			} else {
				b.ZeroGrad()
			}
			require.NoError(t, opt.Step())
			require.InDeltaSlice(t, pa, a.Value.Float64s(), 1e-12, "a after step %d", s)
			require.InDeltaSlice(t, pb, b.Value.Float64s(), 1e-12, "b after step %d", s)
		}

		// Saved after b's first update, resumed: the next step is the same.
		path := filepath.Join(t.TempDir(), "state.safetensors")
		a.ZeroGrad()
		setGrad(b, grads[0])
		require.NoError(t, opt.Step()) // a: 3 updates, b: 3
		b.ZeroGrad()
		setGrad(a, grads[1])
		require.NoError(t, opt.Step()) // a: 4, b: 3, the optimizer: 5 steps
		require.NoError(t, nn.SaveTrainState(context.Background(), path, ps, opt, nil))
		resumed := nn.NewAdamW(ps, 0.1, 0.1)
		defer resumed.Release()
		_, err := nn.LoadTrainState(path, ps, resumed)
		require.NoError(t, err)
		before := b.Value.Float64s()
		setGrad(a, grads[2])
		setGrad(b, grads[2])
		require.NoError(t, opt.Step())
		got := b.Value.Float64s()
		b.Value.CopyFrom(tensor.FromFloat64s(tensor.CPU(), before, 2, 2))
		require.NoError(t, resumed.Step())
		require.Equal(t, got, b.Value.Float64s(), "the resumed optimizer updates b as the original")
	})
}

// TestAdamWGuardedRefusesLateParameter: the guarded update's bias
// corrections are the optimizer's step's, so a parameter updated fewer
// times is an error there (Step handles it), and CommitGuarded counts the
// parameters the guarded update queued.
func TestAdamWGuardedRefusesLateParameter(t *testing.T) {
	tensor.WithScope(func() {
		a, b, _, opt := twoParams(t)
		args, err := tensor.NewAdamWArgs(tensor.CPU())
		require.NoError(t, err)
		defer args.Release()
		g := []float64{0.1, -0.2, 0.3, 1e-3}
		setGrad(a, g)
		require.NoError(t, opt.PrepareGuarded(args))
		require.NoError(t, opt.StepGuarded(args, nil))
		opt.CommitGuarded(false)
		setGrad(b, g)
		require.NoError(t, opt.PrepareGuarded(args))
		require.ErrorIs(t, opt.StepGuarded(args, nil), tensor.ErrArgument, "b has not been updated yet")
		require.NoError(t, opt.Step(), "Step corrects each at its own count")
	})
}
