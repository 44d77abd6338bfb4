package main

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/internal/cli"
	"github.com/strata-ml/strata/nn"
	"github.com/strata-ml/strata/tensor"
)

// TestTrainStateAsWeights: a training state given as -weights is
// refused as a bad flag saying what it is (it used to print 700
// characters of unexpected optimizer.exp_avg.* names).
func TestTrainStateAsWeights(t *testing.T) {
	g, _ := testWeights(t, testCfg, true, nn.LayoutNanoGPT)
	state := filepath.Join(t.TempDir(), "w.state.safetensors")
	c := tensor.NewCtx()
	c.WithScope(func() {
		ts := map[string]*tensor.Tensor{}
		for _, p := range g.Parameters() {
			ts[p.Name] = p.Value
			ts[nn.ExpAvgPrefix+p.Name] = c.Zeros(tensor.CPU(), tensor.Float32, p.Value.Shape()...)
			ts[nn.ExpAvgSqPrefix+p.Name] = c.Zeros(tensor.CPU(), tensor.Float32, p.Value.Shape()...)
		}
		require.NoError(t, tensor.WriteSafetensors(state, ts, map[string]string{"config": fmt.Sprintf("%+v", testCfg)}))
	})
	_, err := parseFlags([]string{"-weights", state}, io.Discard)
	var u cli.UsageError
	require.True(t, errors.As(err, &u), "%v", err)
	require.EqualError(t, err, "-weights "+state+": a training state of train-gpt (-state: weights and optimizer moments), not weights: "+
		"give the weights it saved (-out), or continue the run with train-gpt -resume")
}

// TestMetadataContradictsShapes: metadata claiming a context of 10^9
// over a position table of 16 rows is a mismatch found from the header
// (it used to build the model first and run out of memory for 476 GiB).
func TestMetadataContradictsShapes(t *testing.T) {
	g, _ := testWeights(t, testCfg, true, nn.LayoutNanoGPT)
	bad := testCfg
	bad.Context = 1_000_000_000
	w := filepath.Join(t.TempDir(), "w.safetensors")
	require.NoError(t, tensor.WriteSafetensors(w, paramsByName(g), map[string]string{"config": fmt.Sprintf("%+v", bad), "producer": "strata train-gpt"}))
	_, _, err := runArgs(t, "-weights", w, "-prompt", "1")
	require.ErrorIs(t, err, tensor.ErrShape)
	require.EqualError(t, err, "nn: "+w+": the metadata's config disagrees with the tensor shapes: context 1000000000 in the metadata, 16 in the tensors")
}

func paramsByName(g *nn.GPT) map[string]*tensor.Tensor {
	m := map[string]*tensor.Tensor{}
	for _, p := range g.Parameters() {
		m[p.Name] = p.Value
	}
	return m
}
