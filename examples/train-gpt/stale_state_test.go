package main

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCompleteRunRemovesItsEarlierState: a run that saved its state
// before its last step (-save-every 3 of 4 steps) and then completed
// removes that state: it was left saying "step 3 of 4", and the next run
// at the same -state was refused as if an interrupted run were there to
// continue. A run resumed from such a state removes it when it completes
// too, even with a flag changed.
func TestCompleteRunRemovesItsEarlierState(t *testing.T) {
	dir := t.TempDir()
	common := []string{"-batch", "2", "-device", "cpu", "-quiet", "-eval-every", "0", "-sample", "0", "-loss-plot", "off"}
	state, w := filepath.Join(dir, "s.safetensors"), filepath.Join(dir, "w.safetensors")
	run1 := func(args ...string) error {
		t.Helper()
		o, err := parseFlags(append(append([]string{}, common...), args...))
		require.NoError(t, err)
		return run(o)
	}
	require.NoError(t, run1("-steps", "4", "-save-every", "3", "-out", w, "-state", state))
	require.NoFileExists(t, state, "the complete run's earlier state is gone")
	require.NoError(t, run1("-steps", "4", "-out", w, "-state", state), "the next run is not refused")

	// A state left before the end of a run without -out (the state is its
	// only result, so it stays), then resumed to the end with a flag
	// changed (another identity): the file it resumed is gone.
	require.NoError(t, run1("-steps", "5", "-save-every", "3", "-out", "", "-state", state))
	require.FileExists(t, state, "no -out: the state is the run's only result and stays")
	require.NoError(t, run1("-resume", state, "-lr", "1e-3", "-out", w))
	require.NoFileExists(t, state, "the resumed run completed: the state it resumed is gone")
}
