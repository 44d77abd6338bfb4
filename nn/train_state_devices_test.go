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

// TestLoadTrainStateOutOfMemoryOnAnotherDevice: LoadTrainState once read
// the file onto the first parameter's device and moved a parameter's
// weights and moments to its own device in the copies into the model and
// the optimizer, after the first of them: running out of memory on that
// device left some weights (all of them when a moment's move failed)
// loaded and the optimizer as it was. Every allocation on the second
// device fails once in turn (now the staging buffers and the moments are
// allocated before anything changes); the load must change nothing each
// time.
func TestLoadTrainStateOutOfMemoryOnAnotherDevice(t *testing.T) {
	ma, mb := memory.NewHostManager(memory.Config{}), memory.NewHostManager(memory.Config{})
	da, db := tensor.NewCPUDevice(ma), tensor.NewCPUDevice(mb)
	a := nn.Must(nn.NewLinear(nn.Options{Device: da, Rng: rand.New(rand.NewPCG(1, 2))}, "a", 3, 2, true, 0))
	b := nn.Must(nn.NewLinear(nn.Options{Device: db, Rng: rand.New(rand.NewPCG(3, 4))}, "b", 2, 3, true, 0))
	ps := nn.Collect(a, b)
	opt := nn.NewAdamW(ps, 0.1, 0.1)
	defer func() { opt.Release(); nn.Release(ps) }()
	path := stepAndSave(t, ps, opt, 0.5)
	want := make([][]float32, len(ps))
	for i, p := range ps {
		want[i] = p.Value.Float32s()
		p.Value.Fill(7) // what a failed load must leave
	}
	failed := 0
	for k := int64(1); ; k++ {
		inUse := mb.InUse()
		mb.FailAllocation(k)
		_, err := nn.LoadTrainState(path, ps, opt)
		mb.FailAllocation(0)
		if err == nil {
			break
		}
		failed++
		require.ErrorIs(t, err, memory.ErrInjected, "allocation %d", k)
		require.Equal(t, inUse, mb.InUse(), "allocation %d: nothing left", k)
		for _, p := range ps {
			for _, x := range p.Value.Float32s() {
				require.Equal(t, float32(7), x, "allocation %d: %s changed by a failed load", k, p.Name)
			}
		}
	}
	require.Positive(t, failed, "the moves to the second device were among the allocations failed")
	for i, p := range ps {
		require.Equal(t, want[i], p.Value.Float32s(), p.Name)
	}
}

// stepAndSave gives ps gradients of g, takes one step of opt (its
// moments then exist on every parameter's device: a load allocates no
// state), zeroes the gradients and saves the training state to a file
// whose path it returns.
func stepAndSave(t *testing.T, ps []*nn.Parameter, opt *nn.AdamW, g float64) string {
	t.Helper()
	for _, p := range ps {
		gr, err := tensor.NewKept(p.Value.Device(), tensor.Float32, memory.RoleGradient, p.Value.Shape()...)
		require.NoError(t, err)
		gr.Fill(g)
		p.Grad = gr
	}
	require.NoError(t, opt.Step())
	nn.ZeroGrad(ps)
	path := filepath.Join(t.TempDir(), "state.safetensors")
	require.NoError(t, nn.SaveTrainState(context.Background(), path, ps, opt, nil))
	return path
}
