package main

import (
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
