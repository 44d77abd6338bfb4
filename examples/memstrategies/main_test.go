package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/tensor"
)

func TestFlags(t *testing.T) {
	for args, want := range map[string]string{
		"-steps 0":                    "-steps 0",
		"-strategies device,foo":      `unknown strategy "foo"`,
		"-strategies device,device":   `"device" twice`,
		"-precision fp8":              `-precision "fp8"`,
		"-budget 4XB":                 "-budget",
		"-hybrid-checkpoint none":     "-hybrid-checkpoint",
		"-hybrid-attention plain":     "-hybrid-attention",
		"-hybrid-ckpt-budget 4XB":     "-hybrid-ckpt-budget",
		"-hybrid-offload-keep -2":     `-hybrid-offload-keep "-2": want auto or a count`,
		"-config huge":                "-config",
		"-png /nonexistent/dir/x.png": "-png",
		"-lr NaN":                     "-lr",
		"extra":                       "unexpected arguments",
	} {
		var stderr bytes.Buffer
		_, err := parse(strings.Fields(args), &stderr)
		require.Error(t, err, args)
		assert.Contains(t, err.Error(), want, args)
	}
}

// TestTinyOnCPU runs three strategies on the tiny model: the same loss
// (identical numerics), the hybrid strategy within half the device's
// peak, a table, JSON lines and a PNG.
func TestTinyOnCPU(t *testing.T) {
	dir := t.TempDir()
	png, js := filepath.Join(dir, "m.png"), filepath.Join(dir, "m.jsonl")
	rows, stderr := runRows(t, "-config", "tiny", "-steps", "2", "-warmup", "1", "-strategies", "device,hybrid,hybrid-ckpt", "-png", png, "-json", js)
	require.Len(t, rows, 3)
	assert.Equal(t, rows[0].Loss, rows[1].Loss, "identical numerics, identical loss")
	assert.Equal(t, rows[0].Loss, rows[2].Loss)
	assert.Equal(t, "plain", rows[0].Attention, "the runtime's attention on the CPU")
	assert.Equal(t, "fused", rows[1].Attention, "the hybrid strategies may use every tool")
	assert.Equal(t, rows[0].PeakDevice/2, rows[1].Budget)
	assert.LessOrEqual(t, rows[1].PeakDevice, rows[1].Budget)
	assert.Positive(t, rows[1].Spills, "past the budget the hybrid policy spills")
	assert.Contains(t, stderr, "| hybrid-ckpt |")
	assert.FileExists(t, png)
	assert.FileExists(t, js)
}

// TestHybridOffloadOnCPU: hybrid-ckpt with its checkpointed blocks
// offloaded and no budget of its own gives the device row's loss and says
// so in its row.
func TestHybridOffloadOnCPU(t *testing.T) {
	rows, _ := runRows(t, "-config", "tiny", "-steps", "2", "-warmup", "1", "-strategies", "device,hybrid-ckpt", "-png", "",
		"-hybrid-checkpoint", "selective", "-hybrid-offload", "-hybrid-ckpt-budget", "off")
	require.Len(t, rows, 2)
	assert.Equal(t, rows[0].Loss, rows[1].Loss, "identical numerics, identical loss")
	assert.Zero(t, rows[1].Budget, "-hybrid-ckpt-budget off")
	assert.Equal(t, "selective, offloaded", rows[1].Checkpoint)
	assert.Contains(t, rows[1].Tools, "checkpointing selective, offloaded")
}

// runRows parses args, runs the strategies on the CPU and returns their
// rows (stdout's JSON lines) and what went to stderr (the tables).
func runRows(t *testing.T, args ...string) ([]result, string) {
	t.Helper()
	o, err := parse(args, &bytes.Buffer{})
	require.NoError(t, err)
	var stdout, stderr bytes.Buffer
	require.NoError(t, run(o, tensor.CPU(), &stdout, &stderr))
	var rows []result
	for _, l := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
		var r result
		require.NoError(t, json.Unmarshal([]byte(l), &r))
		rows = append(rows, r)
	}
	return rows, stderr.String()
}

// Flags checked before any strategy trains: a malformed -device, a
// -budget auto with no device strategy before the hybrid ones (it is half
// the device strategy's peak), one file for -png and -json.
func TestFlagsBeforeWork(t *testing.T) {
	dir := t.TempDir()
	same := filepath.Join(dir, "same")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-device", "tpu"}, "-device"},
		{[]string{"-device", "cuda:x"}, "-device"},
		{[]string{"-strategies", "hybrid"}, "-budget auto"},
		{[]string{"-strategies", "zerocopy,hybrid"}, "-budget auto"},
		{[]string{"-strategies", "hybrid,device"}, "-budget auto"},
		{[]string{"-strategies", "device-fused,hybrid-ckpt"}, "-budget auto"},
		{[]string{"-strategies", "hybrid-ckpt", "-budget", "1GiB", "-hybrid-ckpt-budget", "auto"}, "-hybrid-ckpt-budget auto"},
		{[]string{"-png", same, "-json", same}, "-json"},
		// The batch's token ids are Go slices: a batch past any memory
		// crashed the runtime (fatal error: out of memory, a stack trace).
		{[]string{"-batch", "100000000000"}, "-batch"},
		{[]string{"-batch", "9223372036854775807"}, "-batch"},
	} {
		_, err := parse(append([]string{"-config", "tiny"}, c.args...), &bytes.Buffer{})
		require.Error(t, err, "%q", c.args)
		assert.Contains(t, err.Error(), c.want, "%q", c.args)
	}
	for _, args := range [][]string{
		{"-strategies", "device,hybrid"},
		{"-strategies", "hybrid", "-budget", "1GiB"},
		{"-strategies", "hybrid-ckpt", "-hybrid-ckpt-budget", "off"},
		{"-strategies", "device,hybrid-ckpt", "-hybrid-ckpt-budget", "auto"},
		{"-device", "cuda:1"},
	} {
		_, err := parse(append([]string{"-config", "tiny", "-png", ""}, args...), &bytes.Buffer{})
		require.NoError(t, err, "%q", args)
	}
}

// Checking that -png and -json can be written leaves no empty file
// behind (a run that then fails, -device cuda without a GPU, would leave
// it), and keeps a file that was there.
func TestCheckWritableLeavesNoFile(t *testing.T) {
	dir := t.TempDir()
	png, js := filepath.Join(dir, "m.png"), filepath.Join(dir, "m.jsonl")
	require.NoError(t, os.WriteFile(js, []byte("old\n"), 0o644))
	_, err := parse([]string{"-png", png, "-json", js}, &bytes.Buffer{})
	require.NoError(t, err)
	assert.NoFileExists(t, png)
	data, err := os.ReadFile(js)
	require.NoError(t, err)
	assert.Equal(t, "old\n", string(data))
}
