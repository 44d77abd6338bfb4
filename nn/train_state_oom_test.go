package nn_test

import (
	"context"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/nn"
	"github.com/strata-ml/strata/tensor"
)

// TestLoadTrainStateOutOfMemoryChangesNothing: a LoadTrainState that runs
// out of memory at any of its allocations (the file's tensors, the
// checks' copies, the optimizer's new moments) leaves the weights and the
// optimizer as they were, as its doc says of every error: the model and
// its twin, which never loaded anything, take the same next step. Both
// an optimizer with moments of its own and a fresh one are covered.
func TestLoadTrainStateOutOfMemoryChangesNothing(t *testing.T) {
	m := memory.NewHostManager(memory.Config{})
	dev := tensor.NewCPUDevice(m)
	model := func() ([]*nn.Parameter, *nn.AdamW) {
		o := nn.Options{Device: dev, Rng: rand.New(rand.NewPCG(1, 2))}
		fc := nn.Must(nn.NewLinear(o, "fc", 3, 2, true, 0))
		ln := nn.Must(nn.NewLayerNorm(o, "ln", 2))
		ps := nn.Collect(fc, ln)
		opt := nn.NewAdamW(ps, 0.1, 0.1)
		t.Cleanup(func() { opt.Release(); nn.Release(ps) })
		return ps, opt
	}
	grads := func(ps []*nn.Parameter, s float32) {
		for i, p := range ps {
			nn.ZeroGrad([]*nn.Parameter{p})
			g, err := tensor.NewKept(dev, tensor.Float32, memory.RoleGradient, p.Value.Shape()...)
			require.NoError(t, err)
			g.Fill(float64(s) * float64(i+1))
			p.Grad = g
		}
	}
	step := func(ps []*nn.Parameter, opt *nn.AdamW, s float32) {
		grads(ps, s)
		require.NoError(t, opt.Step())
		nn.ZeroGrad(ps)
	}
	path := filepath.Join(t.TempDir(), "state.safetensors")
	{
		ps, opt := model()
		step(ps, opt, 0.5)
		step(ps, opt, -0.25)
		require.NoError(t, nn.SaveTrainState(context.Background(), path, ps, opt, nil))
	}
	for _, fresh := range []bool{false, true} {
		a, optA := model()
		b, optB := model()
		if !fresh {
			step(a, optA, 0.3)
			step(b, optB, 0.3)
		}
		failed := 0
		for k := int64(1); ; k++ {
			m.FailAllocation(k)
			_, err := nn.LoadTrainState(path, a, optA)
			m.FailAllocation(0)
			if err == nil {
				break
			}
			failed++
			require.ErrorIs(t, err, memory.ErrInjected, "fresh %v, allocation %d", fresh, k)
			require.Equal(t, optB.Steps(), optA.Steps(), "fresh %v, allocation %d", fresh, k)
			for i := range a {
				require.Equal(t, b[i].Value.Float32s(), a[i].Value.Float32s(), "fresh %v, allocation %d: %s", fresh, k, a[i].Name)
			}
			step(a, optA, 0.125)
			step(b, optB, 0.125)
			for i := range a {
				require.Equal(t, b[i].Value.Float32s(), a[i].Value.Float32s(), "fresh %v, allocation %d: %s after a step", fresh, k, a[i].Name)
			}
		}
		require.Greater(t, failed, 2*len(a), "fresh %v: the moments' allocations were among those failed", fresh)
	}
}
