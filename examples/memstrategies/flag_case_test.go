package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestNameFlagsAnyCase: amp.ParsePrecision and nn's parsers read their
// names in any case, and so do the flags that go through them, kept in
// their canonical (lower-case) names for the comparisons and the rows'
// JSON; a bad -precision's error keeps its wording and valid values.
func TestNameFlagsAnyCase(t *testing.T) {
	o, err := parse(append([]string{"-config", "tiny", "-png", ""},
		strings.Fields("-strategies device,hybrid-ckpt -precision BF16 -attention Plain -hybrid-checkpoint Blocks -checkpoint-every 2 -hybrid-head FULL")...), &bytes.Buffer{})
	require.NoError(t, err)
	require.Equal(t, []string{"bf16", "plain", "blocks", "full"}, []string{o.precision, o.attention, o.hybridCkpt, o.hybridHead})
	_, err = parse([]string{"-config", "tiny", "-png", "", "-precision", "fp8"}, &bytes.Buffer{})
	require.EqualError(t, err, `-precision "fp8": want fp32, tf32, fp16 or bf16`)
}
