package main

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/internal/cli"
	"github.com/strata-ml/strata/nn"
)

// TestConfigAgainstTensorShapes: for weights without a config in their
// metadata, a -config whose sizes differ from the tensor shapes, and a
// -heads the -config's width does not divide, are bad flags (status 2,
// naming the flag), refused before a model is made. -config gpt2-medium
// on a small file used to build the 350M-parameter model first (4 s
// here) and then fail the load with status 1; -config tiny -heads 3
// failed with status 1 and "nn: GPT config: width 128 is not divisible
// by 3 heads", where -heads 3 alone was a bad flag naming -heads.
func TestConfigAgainstTensorShapes(t *testing.T) {
	_, small := testWeights(t, testCfg, false, nn.LayoutNanoGPT)
	tiny, err := nn.LookupGPTConfig("tiny")
	require.NoError(t, err)
	tiny.Dropout = 0
	_, bare := testWeights(t, tiny, false, nn.LayoutNanoGPT)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-weights", small, "-config", "gpt2-medium"}, "-config gpt2-medium (vocabulary 50257, context 1024, 24 layers, width 1024) disagrees with the file's tensor shapes (vocabulary 256, context 16, 2 layers, width 16)"},
		{[]string{"-weights", small, "-config", "tiny"}, "-config tiny (vocabulary 256, context 64, 2 layers, width 128) disagrees with the file's tensor shapes"},
		{[]string{"-weights", bare, "-config", "tiny", "-heads", "3"}, "-heads 3: nn: GPT config: width 128 is not divisible by 3 heads"},
	} {
		_, errs, err := runArgs(t, c.args...)
		var u cli.UsageError
		require.True(t, errors.As(err, &u), "%q: want a usage error, got %v", c.args, err)
		require.ErrorContains(t, err, c.want, "%q", c.args)
		require.NotContains(t, errs, "loaded in", "%q", c.args)
	}
	out, _, err := runArgs(t, "-weights", bare, "-config", "tiny", "-max-new", "2", "-prompt", "1")
	require.NoError(t, err, "the -config the shapes agree with")
	require.NotEmpty(t, out)
}
