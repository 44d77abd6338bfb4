package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/internal/cli"
	"github.com/strata-ml/strata/nn"
)

// TestMetadataTokenizerTooLargeIsTheFilesError: a file whose metadata
// names a tokenizer with more ids than its model's vocabulary is the
// file's error (status 1), naming its metadata, as a bad n_head in
// config.json is; it was a bad -tokenizer flag (status 2) that no one
// gave ("-tokenizer gpt2: 50257 ids, more than the model's vocabulary of
// 256").
func TestMetadataTokenizerTooLargeIsTheFilesError(t *testing.T) {
	g, _ := testWeights(t, testCfg, true, nn.LayoutNanoGPT)
	w := filepath.Join(t.TempDir(), "w.safetensors")
	require.NoError(t, nn.SaveWeightsLayout(context.Background(), w, g.Parameters(),
		map[string]string{"config": fmt.Sprintf("%+v", testCfg), "tokenizer": "gpt2"}, nn.LayoutNanoGPT))
	_, _, err := runArgs(t, "-weights", w, "-prompt", "1")
	var u cli.UsageError
	require.False(t, errors.As(err, &u), "a usage error: %v", err)
	require.Equal(t, 1, cli.ExitCode(err))
	require.NotContains(t, err.Error(), "-tokenizer gpt2")
	require.ErrorContains(t, err, w+": its metadata's tokenizer gpt2 has 50257 ids, more than the model's vocabulary of 256")
	// -tokenizer given is still a flag's error.
	_, _, err = runArgs(t, "-weights", w, "-prompt", "1", "-tokenizer", "gpt2")
	require.True(t, errors.As(err, &u), "%v", err)
}
