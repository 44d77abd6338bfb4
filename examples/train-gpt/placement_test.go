package main

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/tensor"
)

// TestDeviceBudget: under a device budget far below the run's need the
// hybrid placement spills, the scheduler moves tensors to the offload
// tier, and training goes on with the same losses as without the budget
// (the CPU's tiers are all host memory, so the numerics are the same bit
// for bit); the budget ends with the run. The fused head gives the full
// head's losses within rounding.
func TestDeviceBudget(t *testing.T) {
	dir := t.TempDir()
	losses := func(extra ...string) []float64 {
		log := filepath.Join(dir, strings.Join(extra, "_")+".jsonl")
		args := append([]string{"-config", "char", "-steps", "3", "-batch", "2", "-device", "cpu", "-quiet", "-out", "",
			"-eval-every", "0", "-sample", "0", "-loss-log", log}, extra...)
		o, err := parseFlags(args)
		require.NoError(t, err)
		require.NoError(t, run(o))
		f, err := os.Open(log)
		require.NoError(t, err)
		defer f.Close()
		var out []float64
		for sc := bufio.NewScanner(f); sc.Scan(); {
			var l struct{ Loss float64 }
			require.NoError(t, json.Unmarshal(sc.Bytes(), &l))
			out = append(out, l.Loss)
		}
		return out
	}
	mem := tensor.CPU().Memory()
	before := mem.Stats()
	plain := losses()
	require.Len(t, plain, 3)
	assert.Equal(t, plain, losses("-device-budget", "40MiB", "-placement-plan"), "the same losses under the budget")
	st := mem.Stats()
	assert.Positive(t, st.Spills.Count-before.Spills.Count, "the step did not fit 40 MiB: it spilled")
	assert.Positive(t, st.Migrations.Bytes-before.Migrations.Bytes, "the scheduler moved tensors")
	assert.Zero(t, mem.Limit(memory.TierDevice), "the budget ends with the run")
	// nn.Placement choosing the checkpointing: the same losses at any level.
	assert.Equal(t, plain, losses("-device-budget", "40MiB", "-checkpoint", "auto"))
	fused := losses("-head", "fused")
	assert.InDeltaSlice(t, plain, fused, 1e-5)
}

func TestBudgetFlags(t *testing.T) {
	for args, want := range map[string]string{
		"-device-budget 4XB":  "-device-budget",
		"-device-budget 150%": "-device-budget",
		"-placement-plan -device-budget 1GiB -policy device": "-placement-plan",
		"-head half":       `-head "half": want full, fused or auto`,
		"-checkpoint auto": "-checkpoint auto: needs -device-budget",
		"-checkpoint auto -device-budget 1GiB -checkpoint-every 2": "not with -checkpoint auto",
		"-checkpoint sometimes":                   "want none, blocks, selective or auto",
		"-budget-margin 0.02":                     "-budget-margin 0.02: the placement scheduler's margin needs -device-budget",
		"-budget-margin 0.6 -device-budget 1GiB":  "-budget-margin 0.6: want a share of the budget in [0, 0.5)",
		"-budget-margin -0.1 -device-budget 1GiB": "-budget-margin -0.1: want a share",
		"-budget-margin NaN -device-budget 1GiB":  "-budget-margin NaN: want a share",
		"-budget-margin 0.02 -device-budget off":  "-budget-margin 0.02: the placement scheduler's margin needs -device-budget",
	} {
		_, err := parseFlags(strings.Fields(args))
		require.Error(t, err, args)
		assert.Contains(t, err.Error(), want, args)
	}
	o, err := parseFlags(strings.Fields("-device-budget 0.5 -head fused"))
	require.NoError(t, err)
	assert.Equal(t, "0.5", o.budget)
	assert.True(t, o.headLoss.Fused)
	o, err = parseFlags(strings.Fields("-device-budget 4GiB -budget-margin 0.02"))
	require.NoError(t, err)
	assert.Equal(t, 0.02, o.budgetMargin)
}
