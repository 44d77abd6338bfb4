package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/internal/cli"
)

// TestSecondSignalDuringFinalSaveFinishesIt: a second signal while the
// final weights are being saved abandoned the save, and no training
// state is saved after the last step: the whole run was lost. The save
// now finishes (the weights are the uninterrupted run's) and the run
// ends with 128 + the signal, saying it is complete.
func TestSecondSignalDuringFinalSaveFinishesIt(t *testing.T) {
	_, wantW := reference(t, relCase)
	dir := t.TempDir()
	o, err := parseFlags(relCase.args(dir, "cpu"))
	require.NoError(t, err)
	o.stopWriting = "-out"
	out := captureStderr(t, func() { err = run(o) })
	var ex *cli.ExitError
	require.True(t, errors.As(err, &ex), "%v: %s", err, out)
	require.Equal(t, 130, ex.Code, ex.Msg)
	require.Contains(t, ex.Msg, "the run is complete")
	require.Contains(t, out, "interrupt again: saving the weights to "+filepath.Join(dir, "w.safetensors")+" first")
	require.True(t, bytes.Equal(wantW, readFile(t, filepath.Join(dir, "w.safetensors"))), "the complete run's weights")
}

// During a save a second signal does not abandon (finishing), a third
// signal does: it cancels the save's context, and, once the save is
// over, a fourth quits at once.
func TestThirdSignalAbandonsFinalSave(t *testing.T) {
	var exits []int
	exitProcess = func(code int) { exits = append(exits, code) }
	t.Cleanup(func() { exitProcess = os.Exit })
	in := watchInterrupts("finishing the run")
	defer in.stop()
	doing := "saving the weights to w"
	in.saving.Store(true)
	in.finishing.Store(&doing)
	in.trigger(syscall.SIGINT)
	in.triggerAgain(syscall.SIGINT)
	require.NoError(t, in.ctx.Err(), "the second signal lets the save finish")
	in.triggerAgain(syscall.SIGINT)
	require.Error(t, in.ctx.Err(), "the third abandons it")
	require.Empty(t, exits)
	in.saving.Store(false)
	in.finishing.Store(nil)
	in.triggerAgain(syscall.SIGINT)
	require.Equal(t, []int{130}, exits)
}

// TestFirstSignalDuringFinalSaveSaysItFinishes: the first signal's
// message offered "again to quit at once", which a second signal during
// the final weights' save no longer does (it lets the save finish): the
// message says what a second and a third do there.
func TestFirstSignalDuringFinalSaveSaysItFinishes(t *testing.T) {
	in := watchInterrupts("finishing the run: saving the weights to w")
	defer in.stop()
	doing := "saving the weights to w"
	in.saving.Store(true)
	in.finishing.Store(&doing)
	out := captureStderr(t, func() { in.trigger(syscall.SIGINT) })
	require.NotContains(t, out, "again to quit at once")
	require.Contains(t, out, "saving the weights to w finishes")
}
