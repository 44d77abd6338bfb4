package nn_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/nn"
	"github.com/strata-ml/strata/tensor"
)

// TestLoadWeightsErrorKinds: IsTrainStateFile tells a training state
// from weights (programs say what it is instead of listing its optimizer
// moments as unexpected names); names and shapes of another model wrap tensor.ErrShape, and a
// file that is not safetensors does not.
func TestLoadWeightsErrorKinds(t *testing.T) {
	dir := t.TempDir()
	g := layoutGPT(t, layoutCfg, 1)
	s := newStepper(t, layoutCfg, 1)
	s.steps(t, 1) // AdamW's moments exist after a step
	state := filepath.Join(dir, "s.safetensors")
	require.NoError(t, nn.SaveTrainState(context.Background(), state, s.g.Parameters(), s.opt, nil))
	require.True(t, nn.IsTrainStateFile(state))

	other := layoutCfg
	other.Layers = 3
	w := filepath.Join(dir, "w.safetensors")
	require.NoError(t, nn.SaveWeights(w, layoutGPT(t, other, 1).Parameters(), nil))
	require.False(t, nn.IsTrainStateFile(w))
	require.False(t, nn.IsTrainStateFile(filepath.Join(dir, "none")))
	_, err := nn.LoadWeights(w, g.Parameters())
	require.ErrorIs(t, err, tensor.ErrShape)
	require.ErrorContains(t, err, "unexpected [transformer.h.2.")
	other = layoutCfg
	other.Context = 5
	require.NoError(t, nn.SaveWeights(w, layoutGPT(t, other, 1).Parameters(), nil))
	_, err = nn.LoadWeights(w, g.Parameters())
	require.ErrorIs(t, err, tensor.ErrShape)
	require.ErrorContains(t, err, `"transformer.wpe.weight" has shape [5 8] in the file, the model wants [9 8]`)

	_, err = nn.LoadWeights(filepath.Join(dir, "none"), g.Parameters())
	require.Error(t, err)
	require.NotErrorIs(t, err, tensor.ErrShape)
}

// TestGPTConfigOfWeightsChecksShapes: a metadata config the tensors
// contradict is refused from the header, before a model of its shape is
// built (a context of 10^9 used to run out of memory for 476 GiB).
func TestGPTConfigOfWeightsChecksShapes(t *testing.T) {
	g, err := nn.NewGPT(layoutCfg, nn.Options{Device: tensor.CPU(), DType: tensor.Float32, Rng: rand.New(rand.NewPCG(1, 1))})
	require.NoError(t, err)
	defer nn.Release(g.Parameters())
	bad := layoutCfg
	bad.Context, bad.Width = 1_000_000_000, 16
	path := filepath.Join(t.TempDir(), "w.safetensors")
	require.NoError(t, nn.SaveWeights(path, g.Parameters(), map[string]string{"config": fmt.Sprintf("%+v", bad)}))
	_, _, err = nn.GPTConfigOfWeights(path)
	require.ErrorIs(t, err, tensor.ErrShape)
	require.EqualError(t, err, "nn: "+path+": the metadata's config disagrees with the tensor shapes: context 1000000000 in the metadata, 9 in the tensors, width 16 in the metadata, 8 in the tensors")
}

// TestLoadWeightsIntegerTensorIsErrArgument: a weight stored as integers
// was refused with an error that wrapped nothing, where LoadTrainState's
// refusal of the same weight wraps tensor.ErrArgument (and a non-finite
// one LoadWeights' too); it wraps ErrArgument now, and not ErrShape: the
// names and shapes are the model's.
func TestLoadWeightsIntegerTensorIsErrArgument(t *testing.T) {
	l := nn.Must(nn.NewLinear(nn.Options{}, "l", 2, 3, true, 0))
	defer nn.Release(l.Parameters())
	path := filepath.Join(t.TempDir(), "w.safetensors")
	tensor.WithScope(func() {
		require.NoError(t, tensor.WriteSafetensors(path, map[string]*tensor.Tensor{
			"l.weight": l.Weight.Value,
			"l.bias":   tensor.FromInt32s(tensor.CPU(), []int32{1, 2, 3}, 3),
		}, nil))
	})
	_, err := nn.LoadWeights(path, l.Parameters())
	require.ErrorIs(t, err, tensor.ErrArgument)
	require.NotErrorIs(t, err, tensor.ErrShape)
	require.ErrorContains(t, err, `"l.bias": dtype I32: want a float`)
}
