package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestResumeIgnoresSeedForDropout: a -seed other than the saved run's,
// given to a resumed run, is ignored, as its note says: the dropout masks
// (whose seeds the model draws from -seed when it is built) are the
// saved run's, and the losses those of the uninterrupted run. The model
// was built from the new seed, and every loss after the resume differed.
func TestResumeIgnoresSeedForDropout(t *testing.T) {
	c := resumeCase{"dropout", 6, []string{"-batch", "8", "-dropout", "0.1", "-warmup", "2"}}
	full, resumed := t.TempDir(), t.TempDir()
	o, err := parseFlags(c.args(full, "cpu"))
	require.NoError(t, err)
	require.NoError(t, run(o))

	o, err = parseFlags(c.args(resumed, "cpu"))
	require.NoError(t, err)
	o.stopAt = 3
	require.Error(t, run(o))
	o, err = parseFlags(c.args(resumed, "cpu", "-resume", filepath.Join(resumed, "state.safetensors"), "-seed", "2"))
	require.NoError(t, err)
	require.NoError(t, run(o))

	want, err := os.ReadFile(filepath.Join(full, "loss.jsonl"))
	require.NoError(t, err)
	got, err := os.ReadFile(filepath.Join(resumed, "loss.jsonl"))
	require.NoError(t, err)
	require.Equal(t, string(want), string(got), "losses")
}
