package nn_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/nn"
	"github.com/strata-ml/strata/tensor"
)

// keptParam is a float32 parameter of shape filled with v.
func keptParam(t *testing.T, name string, v float64, shape ...int) *nn.Parameter {
	t.Helper()
	x, err := tensor.NewKept(tensor.CPU(), tensor.Float32, memory.RoleParameter, shape...)
	require.NoError(t, err)
	x.Fill(v)
	t.Cleanup(x.Release)
	return &nn.Parameter{Var: autograd.Param(x, name), Name: name}
}

// TestTrainStateZeroSizeParameter: a parameter with no elements (a
// zero-width layer; AdamW steps it and SaveWeights and LoadWeights take
// it) has moments of no elements, which SaveTrainState writes; loading
// the file back checked them with a max over no elements, an error
// ("max over empty axis"), so a state saved by SaveTrainState could not
// be loaded.
func TestTrainStateZeroSizeParameter(t *testing.T) {
	ps := []*nn.Parameter{keptParam(t, "z", 0, 4, 0), keptParam(t, "a", 1.5, 3)}
	opt := nn.NewAdamW(ps, 0.1, 0)
	defer opt.Release()
	setGrads := func() {
		for _, p := range ps {
			g := tensor.FromFloat32s(tensor.CPU(), make([]float32, p.Value.Numel()), p.Value.Shape()...)
			g.Fill(0.25)
			tensor.Keep(g)
			p.ZeroGrad()
			p.Grad = g
		}
	}
	setGrads()
	require.NoError(t, opt.Step())
	path := filepath.Join(t.TempDir(), "state.safetensors")
	require.NoError(t, nn.SaveTrainState(context.Background(), path, ps, opt, nil))

	want := ps[1].Value.Float32s()
	ps[1].Value.Fill(7)
	opt2 := nn.NewAdamW(ps, 0.1, 0)
	defer opt2.Release()
	_, err := nn.LoadTrainState(path, ps, opt2)
	require.NoError(t, err)
	require.Equal(t, 1, opt2.Steps())
	require.Equal(t, want, ps[1].Value.Float32s())

	// The loaded optimizer continues as the saved one does.
	setGrads()
	require.NoError(t, opt.Step())
	cont := ps[1].Value.Float32s()
	tensor.WithScope(func() { ps[1].Value.CopyFrom(tensor.FromFloat32s(tensor.CPU(), want, 3)) })
	setGrads()
	require.NoError(t, opt2.Step())
	require.Equal(t, cont, ps[1].Value.Float32s())
	nn.ZeroGrad(ps)
}

// TestTrainStateReservesOptimizerKey: SaveTrainState writes the
// metadata entry "optimizer" (the optimizer's name, which LoadTrainState
// checks); a caller's entry of that name was silently replaced by
// "AdamW", its value lost. It is refused as the "optimizer." keys are,
// and the file is left as it was.
func TestTrainStateReservesOptimizerKey(t *testing.T) {
	ps := []*nn.Parameter{keptParam(t, "a", 1.5, 3)}
	opt := nn.NewAdamW(ps, 0.1, 0)
	defer opt.Release()
	path := filepath.Join(t.TempDir(), "state.safetensors")
	err := nn.SaveTrainState(context.Background(), path, ps, opt, map[string]string{"optimizer": "my fused adamw"})
	require.ErrorContains(t, err, `metadata key "optimizer" is reserved`)
	require.NoFileExists(t, path)
	require.NoError(t, nn.SaveTrainState(context.Background(), path, ps, opt, map[string]string{"optimizers": "kept"}))
	meta, err := nn.LoadTrainState(path, ps, opt)
	require.NoError(t, err)
	require.Equal(t, "kept", meta["optimizers"])
	require.Equal(t, "AdamW", meta["optimizer"])
}

// TestLoadTrainStateMismatchIsErrShape: a training state of another
// model (other shapes, other names) was refused with an error that
// wrapped nothing, where LoadWeights' refusal of the same file's weights
// wraps tensor.ErrShape, so a program could not tell "the state is
// another model's" from a file it cannot read. Both wrap ErrShape now.
func TestLoadTrainStateMismatchIsErrShape(t *testing.T) {
	cfg := nn.GPTConfig{Vocab: 13, Context: 6, Layers: 1, Heads: 2, Width: 8}
	a := newStepper(t, cfg, 1)
	a.steps(t, 1)
	path := filepath.Join(t.TempDir(), "state.safetensors")
	require.NoError(t, nn.SaveTrainState(context.Background(), path, a.g.Parameters(), a.opt, nil))
	for _, c := range []struct {
		cfg  nn.GPTConfig
		what string
	}{
		{nn.GPTConfig{Vocab: 13, Context: 6, Layers: 1, Heads: 2, Width: 16}, "the model wants"},
		{nn.GPTConfig{Vocab: 13, Context: 6, Layers: 2, Heads: 2, Width: 8}, "missing [transformer.h.1."},
	} {
		b := newStepper(t, c.cfg, 1)
		_, err := nn.LoadTrainState(path, b.g.Parameters(), b.opt)
		require.ErrorIs(t, err, tensor.ErrShape, "%+v", c.cfg)
		require.ErrorContains(t, err, c.what)
	}
	// One moment without the other: a name the model's state lacks.
	l, opt := trainedLinear(t)
	half := filepath.Join(t.TempDir(), "half.safetensors")
	tensor.WithScope(func() {
		require.NoError(t, nn.SaveTrainState(context.Background(), path, l.Parameters(), opt, nil))
		ts, meta, err := tensor.ReadSafetensors(path, tensor.CPU())
		require.NoError(t, err)
		delete(ts, nn.ExpAvgSqPrefix+"l.bias")
		require.NoError(t, tensor.WriteSafetensors(half, ts, meta))
	})
	_, err := nn.LoadTrainState(half, l.Parameters(), opt)
	require.ErrorIs(t, err, tensor.ErrShape)
	require.ErrorContains(t, err, "one AdamW moment but not the other")
}
