package main

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/internal/cli"
)

// TestVocabHint: the hint for a vocabulary smaller than -tokenizer's
// fits the case (-vocab 100 with byte used to suggest -config gpt2).
func TestVocabHint(t *testing.T) {
	for args, want := range map[[4]string]string{
		{"-vocab", "100", "-tokenizer", "byte"}:   "-tokenizer byte has 256 ids, more than the model's vocabulary of 100 (-config tiny): use -vocab 256 or more, or leave -vocab out (-config tiny has 256)",
		{"-vocab", "300", "-tokenizer", "gpt2"}:   "-tokenizer gpt2 has 50257 ids, more than the model's vocabulary of 300 (-config tiny): use -vocab 50257 or more",
		{"-config", "char", "-tokenizer", "gpt2"}: "-tokenizer gpt2 has 50257 ids, more than the model's vocabulary of 256 (-config char): use -config gpt2, or -vocab 50257 or more",
	} {
		o, err := parseFlags(append(args[:], "-data", textFile(t), "-device", "cpu", "-quiet", "-out", ""))
		require.NoError(t, err)
		err = run(o)
		var ex *cli.ExitError
		require.ErrorAs(t, err, &ex)
		require.Equal(t, 2, ex.Code)
		require.Equal(t, want, ex.Msg)
	}
}

// TestVocabHintOnResume: a resumed run given a -tokenizer its saved
// run's vocabulary cannot hold was told to use -config gpt2 or a larger
// -vocab, each of which the state then refused (its run's -config and
// vocabulary). The hint now says the resumed run keeps them.
func TestVocabHintOnResume(t *testing.T) {
	dir := t.TempDir()
	c := resumeCase{"text", 4, []string{"-batch", "2", "-sample", "0"}}
	o, err := parseFlags(c.args(dir, "cpu", "-data", textFile(t)))
	require.NoError(t, err)
	o.stopAt = 2
	require.Error(t, run(o))
	state := filepath.Join(dir, "state.safetensors")
	o, err = parseFlags([]string{"-device", "cpu", "-quiet", "-resume", state, "-tokenizer", "gpt2"})
	require.NoError(t, err)
	err = run(o)
	var ex *cli.ExitError
	require.ErrorAs(t, err, &ex)
	require.Equal(t, 2, ex.Code)
	require.Equal(t, "-tokenizer gpt2 has 50257 ids, more than the model's vocabulary of 256 (-config tiny): -resume "+state+" continues its run's model and tokenizer: leave -tokenizer and -vocab out", ex.Msg)
}
