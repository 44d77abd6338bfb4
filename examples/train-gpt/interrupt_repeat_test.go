package main

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/internal/testfs"
)

// A repeat of the first signal within repeatWindow is the same request
// (coreutils' timeout -s INT sends it to the process and to its process
// group, microseconds apart): it neither cancels the save nor quits. A
// later one quits at once, as before; triggerAgain (the tests' hooks)
// does whenever it comes.
func TestRepeatSignalWithinWindow(t *testing.T) {
	var exits []int
	exitProcess = func(code int) { exits = append(exits, code) }
	t.Cleanup(func() { exitProcess = os.Exit })

	in := watchInterrupts("finishing the step")
	defer in.stop()
	in.trigger(syscall.SIGINT)
	in.trigger(syscall.SIGINT)
	in.trigger(syscall.SIGTERM)
	require.Empty(t, exits, "a repeat within the window quits")
	require.NoError(t, in.ctx.Err(), "a repeat within the window cancels the save")
	s, ok := in.received()
	require.True(t, ok)
	require.Equal(t, syscall.SIGINT, s)

	past := time.Now().Add(-2 * repeatWindow)
	in.firstAt.Store(&past)
	in.trigger(syscall.SIGINT)
	require.Equal(t, []int{130}, exits, "a second signal after the window quits at once")
	require.Error(t, in.ctx.Err())

	exits = nil
	in2 := watchInterrupts("finishing the step")
	defer in2.stop()
	in2.trigger(syscall.SIGTERM)
	in2.triggerAgain(syscall.SIGTERM)
	require.Equal(t, []int{143}, exits, "triggerAgain is a second signal")
}

// Real signals: SIGINT twice in quick succession, as timeout -s INT sends
// it, finishes the step and saves the training state (exit 130), instead
// of quitting without saving at the second. (Two signals sent before the
// process takes the first are one for the kernel: the second goes 20 ms
// later, after the first was taken, as timeout's may.)
func TestDoubleSignalFromTimeoutSaves(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a subprocess")
	}
	dir := t.TempDir()
	c := resumeCase{"timeout", 100000, []string{"-batch", "8"}}
	cmd, stderr := startLogging(t, dir, c, 3)
	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	time.Sleep(20 * time.Millisecond)
	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	err := cmd.Wait()
	var ee *exec.ExitError
	require.True(t, errors.As(err, &ee), "%v: %s", err, stderr.String())
	require.Equal(t, 130, ee.ExitCode(), stderr.String())
	require.NotContains(t, stderr.String(), "quitting without saving")
	require.Contains(t, stderr.String(), "saved the training state to")
	require.Equal(t, []string{"loss.jsonl", "state.safetensors"}, testfs.Names(t, dir))
}
