package main

import (
	"bytes"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/tensor"
)

// TestIgnoredFlagsRefused: a flag given that no strategy of -strategies
// would use is refused, naming it, as README promises (they used to be
// ignored), and so is -budget 0 (off, none), which ran the hybrid rows
// without a budget (budget_bytes 0).
func TestIgnoredFlagsRefused(t *testing.T) {
	for _, c := range []struct{ args, want string }{
		{"-strategies device -budget 1GiB", "-budget: the hybrid strategies' budget"},
		{"-strategies device -overlap", "-overlap"},
		{"-strategies device -pipeline", "-pipeline"},
		{"-strategies device,role -plan", "-plan:"},
		{"-strategies device -plan-every", "-plan-every"},
		{"-strategies device -hybrid-head full", "-hybrid-head"},
		{"-strategies device -hybrid-attention same", "-hybrid-attention"},
		{"-strategies device,hybrid -hybrid-offload", "-hybrid-offload: hybrid-ckpt's offload"},
		{"-strategies device,hybrid -checkpoint-every 2", "-checkpoint-every"},
		{"-strategies device,hybrid-ckpt -checkpoint-every 2", "-checkpoint-every: only with -hybrid-checkpoint blocks"},
		{"-strategies device,hybrid -hybrid-ckpt-budget off", "-hybrid-ckpt-budget"},
		{"-strategies device,hybrid -hybrid-checkpoint blocks", "-hybrid-checkpoint"},
		{"-strategies device,hybrid-ckpt -hybrid-offload-keep 1", "-hybrid-offload-keep: only with -hybrid-offload"},
		{"-strategies hybrid-ckpt -hybrid-ckpt-budget off -budget 1GiB", "-budget: hybrid-ckpt has its own budget"},
		{"-strategies hybrid,hybrid-ckpt -budget 1GiB -attention plain", "-attention: every strategy"},
		{"-strategies device,hybrid -budget 0", "-budget 0: the hybrid strategies run under a budget"},
		{"-strategies device,hybrid -budget off", "-budget off"},
		{"-budget 4XB", "or auto"},
	} {
		_, err := parse(append([]string{"-config", "tiny", "-png", ""}, strings.Fields(c.args)...), &bytes.Buffer{})
		require.Error(t, err, c.args)
		assert.Contains(t, err.Error(), c.want, c.args)
	}
	for _, args := range []string{
		"-strategies device,hybrid -budget 1GiB -overlap -plan -hybrid-head full",
		"-strategies device,hybrid-ckpt -hybrid-checkpoint blocks -checkpoint-every 2 -hybrid-offload -hybrid-offload-keep 1",
		"-strategies device,hybrid-ckpt -hybrid-ckpt-budget off",
		"-strategies device,hybrid -hybrid-attention same -attention plain",
		"-strategies device-fused -hybrid-attention same",
		"-strategies device -attention plain",
	} {
		_, err := parse(append([]string{"-config", "tiny", "-png", ""}, strings.Fields(args)...), &bytes.Buffer{})
		require.NoError(t, err, args)
	}
}

// failWriter fails every write, as stdout on a full disk does.
type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("no space left on device") }

// TestResultsWriteFailure: the JSON lines going to a stdout that fails
// are a failure of the run (status 1), naming stdout; it used to exit 0
// with the rows lost. -json is still written.
func TestResultsWriteFailure(t *testing.T) {
	js := filepath.Join(t.TempDir(), "m.jsonl")
	o, err := parse([]string{"-config", "tiny", "-steps", "1", "-warmup", "0", "-strategies", "device", "-png", "", "-json", js}, &bytes.Buffer{})
	require.NoError(t, err)
	err = run(o, tensor.CPU(), failWriter{}, &bytes.Buffer{})
	require.ErrorContains(t, err, "writing the results to stdout: no space left on device")
	assert.FileExists(t, js)
	o, err = parse([]string{"-config", "tiny", "-steps", "1", "-warmup", "0", "-strategies", "device", "-png", ""}, &bytes.Buffer{})
	require.NoError(t, err)
	err = run(o, tensor.CPU(), &bytes.Buffer{}, failWriter{})
	require.ErrorContains(t, err, "writing the table to stderr")
}

// TestCheckpointEveryPastTheBlocks: -checkpoint-every past the model's
// blocks checkpoints none of them (the every-th, 2·every-th, ... block),
// so the hybrid-ckpt row ran without checkpointing while it said "blocks
// every 3"; it is refused, naming the blocks, as train-gpt refuses it.
func TestCheckpointEveryPastTheBlocks(t *testing.T) {
	args := []string{"-config", "tiny", "-png", "", "-strategies", "device,hybrid-ckpt", "-hybrid-checkpoint", "blocks", "-checkpoint-every"}
	_, err := parse(append(args, "3"), &bytes.Buffer{})
	require.EqualError(t, err, "-checkpoint-every 3: more than the 2 blocks of -config tiny (no block would be checkpointed)")
	_, err = parse(append(args, "2"), &bytes.Buffer{})
	require.NoError(t, err)
}
