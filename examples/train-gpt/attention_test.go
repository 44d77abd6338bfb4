package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/nn"
)

// TestAttentionFlag: -attention picks plain, fused or auto (the default:
// plain on the CPU), a bad value is refused naming the flag, and a -bench
// run works with each.
func TestAttentionFlag(t *testing.T) {
	_, err := parseFlags([]string{"-attention", "flash"})
	require.ErrorContains(t, err, `-attention "flash": want plain, fused or auto`)
	o, err := parseFlags(strings.Fields("-bench -steps 1 -bench-warmup 0 -batch 2 -device cpu -precision bf16"))
	require.NoError(t, err)
	require.Equal(t, "auto", o.attention)
	require.NoError(t, run(o))
	require.Equal(t, nn.AttentionPlain, o.attn, "auto is plain on the CPU")
	for _, a := range []string{"plain", "fused"} {
		o, err := parseFlags(append(strings.Fields("-bench -steps 1 -bench-warmup 0 -batch 2 -device cpu -attention"), a))
		require.NoError(t, err, a)
		require.Equal(t, a, o.attn.String())
		require.NoError(t, run(o), a)
	}
}
