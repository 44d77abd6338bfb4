package memory_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/memory"
)

// TestParseBudgetRefusesSilentWrongResults: "1.5" became 1 byte and "2.7"
// 2 bytes (neither a share nor a whole byte count), and a share of a
// small whole that rounds to nothing became 0, which means no budget.
func TestParseBudgetRefusesSilentWrongResults(t *testing.T) {
	for _, c := range []struct {
		in    string
		whole int64
		want  string
	}{
		{"1.5", 80 << 30, "share below 1"},
		{"2.7", 80 << 30, "share below 1"},
		{"1.0", 80 << 30, "100%"}, // all of it as often as one byte
		{"2.0", 80 << 30, "100%"},
		{"0.99999999999999999", 80 << 30, "share below 1"}, // a float64 rounds it to 1
		{"2.7B", 80 << 30, "whole"},
		{"0.0001", 1000, "less than a byte"},
		{"0.5", 1, "less than a byte"},
	} {
		n, err := memory.ParseBudget(c.in, c.whole)
		require.ErrorIs(t, err, memory.ErrInvalidArgument, "%q gave %d", c.in, n)
		assert.Contains(t, err.Error(), c.want, c.in)
		assert.Contains(t, err.Error(), `budget "`+c.in+`"`)
		assert.Equal(t, 1, strings.Count(err.Error(), "want"), err.Error())
	}
	_, err := memory.ParseHostMemory("1.5", 1000)
	require.Error(t, err, "a fractional byte count is no host budget either")
	for in, want := range map[string]int64{"2": 2, "1.5KiB": 1536, "1.5K": 1536, "0.5": 40 << 30, "0.0001": 8589934, "1.5GB": 1.5e9} {
		got, err := memory.ParseBudget(in, 80<<30)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
}
