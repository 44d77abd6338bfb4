package nn_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/nn"
	"github.com/strata-ml/strata/tensor"
)

// TestSaveWeightsLayoutAutoIsNanoGPT: LayoutAuto, the zero value, was
// refused on save ("want nanogpt or hf"); it writes the default layout,
// nanoGPT's (what SaveWeights and train-gpt's -out write), byte for byte.
func TestSaveWeightsLayoutAutoIsNanoGPT(t *testing.T) {
	g, err := nn.NewGPT(nn.GPTConfig{Vocab: 16, Context: 8, Layers: 1, Heads: 2, Width: 8}, nn.Options{})
	require.NoError(t, err)
	defer nn.Release(g.Parameters())
	dir := t.TempDir()
	auto, nano := filepath.Join(dir, "auto.safetensors"), filepath.Join(dir, "nanogpt.safetensors")
	require.NoError(t, g.SaveWeights(context.Background(), auto, nil, nn.LayoutAuto))
	require.NoError(t, g.SaveWeights(context.Background(), nano, nil, nn.LayoutNanoGPT))
	a, err := os.ReadFile(auto)
	require.NoError(t, err)
	b, err := os.ReadFile(nano)
	require.NoError(t, err)
	require.True(t, bytes.Equal(a, b), "LayoutAuto writes nanoGPT's layout")
	_, l, err := nn.LoadWeightsLayout(auto, g.Parameters(), nn.LayoutAuto)
	require.NoError(t, err)
	require.Equal(t, nn.LayoutNanoGPT, l)
}

// TestPipelineGroupsRefusesNilEntry: a nil entry was a nil-pointer panic;
// it is refused as ByName and Distinct refuse it, naming its index.
func TestPipelineGroupsRefusesNilEntry(t *testing.T) {
	p := &nn.Parameter{Var: autograd.Param(tensor.Zeros(tensor.CPU(), tensor.Float32, 4), "w"), Name: "w"}
	defer nn.Release([]*nn.Parameter{p})
	for _, ps := range [][]*nn.Parameter{{p, nil}, {p, {Name: "empty"}}} {
		var ends []int
		err := tensor.Try(func() {
			var err error
			ends, err = nn.PipelineGroups(ps)
			require.ErrorIs(t, err, tensor.ErrArgument)
			require.EqualError(t, err, "nn: PipelineGroups: parameter 1 is nil: "+tensor.ErrArgument.Error())
		})
		require.NoError(t, err, "no panic")
		require.Nil(t, ends)
	}
}

// TestBlockNilSublayerRefused: a Block literal without a norm, its
// attention or its MLP panicked with a nil dereference in Forward; it
// panics with an *tensor.OpError naming the field, which tensor.Try
// returns. A nil Drop is still no dropout.
func TestBlockNilSublayerRefused(t *testing.T) {
	g, err := nn.NewGPT(nn.GPTConfig{Vocab: 16, Context: 8, Layers: 1, Heads: 2, Width: 8}, nn.Options{})
	require.NoError(t, err)
	defer nn.Release(g.Parameters())
	full := *g.Blocks[0]
	tensor.WithScope(func() {
		x := autograd.Const(tensor.Zeros(tensor.CPU(), tensor.Float32, 1, 3, 8))
		for field, b := range map[string]nn.Block{
			"Ln1":  {Ln2: full.Ln2, Attn: full.Attn, MLP: full.MLP},
			"Ln2":  {Ln1: full.Ln1, Attn: full.Attn, MLP: full.MLP},
			"Attn": {Ln1: full.Ln1, Ln2: full.Ln2, MLP: full.MLP},
			"MLP":  {Ln1: full.Ln1, Ln2: full.Ln2, Attn: full.Attn},
		} {
			err := tensor.Try(func() { b.Forward(x) })
			var oe *tensor.OpError
			require.ErrorAs(t, err, &oe, field)
			require.ErrorIs(t, err, tensor.ErrArgument, field)
			require.ErrorContains(t, err, "nn.Block: "+field+" is nil", field)
		}
		var nilBlock *nn.Block
		require.ErrorIs(t, tensor.Try(func() { nilBlock.Forward(x) }), tensor.ErrArgument)
		noDrop := full
		noDrop.Drop = nil
		require.NoError(t, tensor.Try(func() { noDrop.Forward(x) }))
	})
	// Generation (the KV-cache decoder walks the blocks itself) refuses
	// it too, with an error instead of a nil-pointer panic.
	g.Blocks[0] = &nn.Block{Ln2: full.Ln2, Attn: full.Attn, MLP: full.MLP}
	defer func() { g.Blocks[0] = &full }()
	_, err = g.Generate(tensor.NewCtx(), []int{1, 2}, nn.GenerateOptions{MaxNewTokens: 2})
	require.ErrorIs(t, err, tensor.ErrArgument)
	require.ErrorContains(t, err, "nn.Block: Ln1 is nil")
}

// TestHalfParametersCannotTrain pins the package doc: Linear and
// Embedding accept half parameters and run forward and backward (their
// gradients in the parameters' dtype), but AdamW and SGD refuse to update
// them.
func TestHalfParametersCannotTrain(t *testing.T) {
	for _, dt := range []tensor.DType{tensor.BFloat16, tensor.Float16} {
		o := nn.Options{DType: dt}
		l, err := nn.NewLinear(o, "fc", 4, 3, true, 0.02)
		require.NoError(t, err)
		e, err := nn.NewEmbedding(o, "wte", 5, 4, 0.02)
		require.NoError(t, err)
		adam, sgd := nn.NewAdamW(l.Parameters(), 1e-3, 0), nn.NewSGD(l.Parameters(), 1e-3, 0.9)
		tensor.WithScope(func() {
			y := l.Forward(autograd.Const(tensor.Ones(tensor.CPU(), dt, 2, 4)))
			require.NoError(t, y.BackwardWith(tensor.Ones(tensor.CPU(), dt, 2, 3)), dt)
			require.ErrorIs(t, adam.Step(), tensor.ErrDType, dt)
			require.ErrorIs(t, sgd.Step(), tensor.ErrDType, dt)
			var h *autograd.Var
			require.NoError(t, tensor.Try(func() { h = e.Forward(tensor.FromInt32s(tensor.CPU(), []int32{1, 2}, 2)) }), dt)
			require.NoError(t, h.BackwardWith(tensor.Ones(tensor.CPU(), dt, 2, 4)), dt)
			require.Equal(t, dt, e.Weight.Grad.DType(), dt)
		})
		adam.Release()
		sgd.Release()
		nn.Release(l.Parameters())
		nn.Release(e.Parameters())
	}
}
