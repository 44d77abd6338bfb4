package main

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/internal/cli"
)

// TestInterruptStopsEndSample: a signal after the last step (here in it)
// stops the end's -sample at once, saves the weights and exits with 130.
// The sample used to run to its end first (-sample 100000 on the CPU:
// minutes, the message saying "finishing the run: saving the weights"),
// and the second Ctrl-C a user then pressed quit without saving: neither
// weights nor a training state, the whole run lost.
func TestInterruptStopsEndSample(t *testing.T) {
	dir := t.TempDir()
	c := resumeCase{"sample", 2, []string{"-data", textFile(t), "-batch", "2", "-sample", "1000000", "-loss-plot", "off"}}
	o, err := parseFlags(c.args(dir, "cpu"))
	require.NoError(t, err)
	o.stopAt = c.steps
	done := make(chan struct{})
	var out string
	go func() {
		defer close(done)
		out = captureStderr(t, func() { err = run(o) })
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the sample of 1000000 tokens ran on after the interrupt")
	}
	var ex *cli.ExitError
	require.True(t, errors.As(err, &ex), "%v", err)
	require.Equal(t, 130, ex.Code)
	require.Contains(t, ex.Msg, "the run is complete")
	require.Contains(t, out, "sample stopped by interrupt after ")
	_, err = os.Stat(filepath.Join(dir, "w.safetensors"))
	require.NoError(t, err, "the weights are saved")
}
