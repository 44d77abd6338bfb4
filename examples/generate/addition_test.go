package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/internal/cli"
	"github.com/strata-ml/strata/nn"
	"github.com/strata-ml/strata/tensor"
)

// -addition asks problems of the digits train-gpt recorded in the file
// (a 4-digit model scored on 3-digit problems scored near 0%), refuses an
// explicit -digits that differs, and -save keeps the record.
func TestAdditionDigitsFromMetadata(t *testing.T) {
	g, err := nn.NewGPT(testCfg, nn.Options{Device: tensor.CPU(), DType: tensor.Float32, Rng: rand.New(rand.NewPCG(9, 9))})
	require.NoError(t, err)
	t.Cleanup(func() { nn.Release(g.Parameters()) })
	w := filepath.Join(t.TempDir(), "w.safetensors")
	meta := map[string]string{"config": fmt.Sprintf("%+v", testCfg), "producer": "strata train-gpt", "tokenizer": "byte", "digits": "4"}
	require.NoError(t, nn.SaveWeightsLayout(context.Background(), w, g.Parameters(), meta, nn.LayoutNanoGPT))

	out, _, err := runArgs(t, "-weights", w, "-addition", "3", "-quiet")
	require.NoError(t, err)
	require.Contains(t, out, "(4-digit addition")
	out, _, err = runArgs(t, "-weights", w, "-addition", "3", "-quiet", "-digits", "4")
	require.NoError(t, err)
	require.Contains(t, out, "(4-digit addition")
	_, _, err = runArgs(t, "-weights", w, "-addition", "3", "-digits", "3")
	var u cli.UsageError
	require.True(t, errors.As(err, &u), "%v", err)
	require.ErrorContains(t, err, "-digits 3 disagrees with the file's metadata (4-digit addition)")
	require.Equal(t, "4", resavedMetadata(t, w)["digits"], "-save keeps it")
}
