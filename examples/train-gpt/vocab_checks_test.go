package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestHugeVocabRefused: a -vocab whose token embedding cannot be made is
// refused with the flags (status 2, naming -vocab), as a huge -batch is.
// It used to start the run and fail after it with status 1 and an error
// naming no flag: "tensor.NewKept: shape [9223372036854775807 128] has
// too many elements: shape mismatch", or an out-of-memory error for
// 512 TiB and the memory summary; with STRATA_HOST_MEMORY=off, a fatal
// "runtime: out of memory" and pages of goroutine stacks (the weights
// are drawn on the host, 8 bytes an element, on every device).
func TestHugeVocabRefused(t *testing.T) {
	t.Setenv("STRATA_HOST_MEMORY", "1GiB")
	for args, want := range map[string]string{
		"-vocab 9223372036854775807":                     "-vocab 9223372036854775807: more than the 2147483647 ids int32 token ids can name",
		"-vocab 1099511627776":                           "-vocab 1099511627776: more than the 2147483647 ids",
		"-vocab 2147483647":                              "-vocab 2147483647: the token embedding's 2147483647 x 128 weights are drawn on the host at 8 bytes each: 2.00 TiB, more than the host memory budget of 1.00 GiB",
		"-bench -vocab 100000000":                        "-vocab 100000000: the token embedding's 100000000 x 128 weights",
		"-data x.txt -config gpt2 -vocab 1000000":        "-vocab 1000000: the token embedding's 1000000 x 768 weights",
		"-memory-trace m.json -vocab 400000000000000000": "-vocab 400000000000000000: more than the 2147483647 ids",
	} {
		_, err := parseFlags(strings.Fields(args))
		require.ErrorContains(t, err, want, args)
		require.NotContains(t, err.Error(), "\n", args)
	}
	for _, args := range []string{"-vocab 50304 -data x.txt -tokenizer gpt2", "-vocab 300", "-bench -vocab 65536"} {
		_, err := parseFlags(strings.Fields(args))
		require.NoError(t, err, args)
	}
	t.Setenv("STRATA_HOST_MEMORY", "off")
	_, err := parseFlags([]string{"-vocab", "9223372036854775807"})
	require.ErrorContains(t, err, "more than the 2147483647 ids", "no budget: an id past int32 is still refused")
}
