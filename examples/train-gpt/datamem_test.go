package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDataMemoryChecked: a -data file whose load would pass the host
// memory budget is refused before it is read, naming the need and the
// budget (a 100 MB text with gpt2 used to peak at 1.75 GB, and a file too
// large got the process killed by the kernel).
func TestDataMemoryChecked(t *testing.T) {
	text := filepath.Join(t.TempDir(), "text.txt")
	require.NoError(t, os.WriteFile(text, []byte(strings.Repeat("the quick brown fox jumps.\n", 40000)), 0o644)) // 1.08 MB
	t.Setenv("STRATA_HOST_MEMORY", "4MiB")
	b, err := hostBudget()
	require.NoError(t, err)
	_, err = loadTokens(text, mustTokenizer(t, "gpt2"), 64, b)
	require.EqualError(t, err, "-data "+text+": 1.03 MiB as text tokenized with -tokenizer gpt2 needs about 5.15 MiB of memory to load, "+
		"more than the host memory budget of 4.00 MiB (STRATA_HOST_MEMORY=4MiB): use a smaller file, or tokenize it once into a token file (.bin)")
	d, err := loadTokens(text, mustTokenizer(t, "byte"), 64, b)
	require.NoError(t, err, "3 times its size fits")
	require.Len(t, d.train, 1080000*9/10)
	o, err := parseFlags([]string{"-data", text, "-config", "gpt2", "-tokenizer", "gpt2"})
	require.NoError(t, err)
	_, err = loadTokens(text, o.tok, 64, o.hostBudget)
	require.ErrorContains(t, err, "more than the host memory budget of 4.00 MiB", "the budget the flags read")
	t.Setenv("STRATA_HOST_MEMORY", "off")
	b, err = hostBudget()
	require.NoError(t, err)
	require.Nil(t, b)
	_, err = loadTokens(text, mustTokenizer(t, "gpt2"), 64, b)
	require.NoError(t, err, "no budget, no check")
}
