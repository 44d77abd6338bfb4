package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/cuda"
)

// TestReport: one JSON line a row, and the table.
func TestReport(t *testing.T) {
	rows := []row{{Host: "pinned", Direction: "h2d", Bytes: 1 << 30, BestMS: 19, MedianMS: 20, GBs: 53.7, Device: "cuda:0"},
		{Host: "managed", Direction: "both", Bytes: 2 << 30, BestMS: 40, MedianMS: 41, GBs: 52.4, Device: "cuda:0"}}
	var js, table bytes.Buffer
	require.NoError(t, report(&js, &table, rows))
	lines := strings.Split(strings.TrimSpace(js.String()), "\n")
	require.Len(t, lines, 2)
	var r row
	require.NoError(t, json.Unmarshal([]byte(lines[1]), &r))
	assert.Equal(t, rows[1], r)
	assert.Contains(t, table.String(), "| managed | both | 2.00 GiB | 40.00 | 41.00 | 52.4 |")
}

// TestMeasure runs a small measurement where a GPU is present: every row,
// each with a positive rate.
func TestMeasure(t *testing.T) {
	if err := cuda.Init(); err != nil {
		if os.Getenv("STRATA_REQUIRE_GPU") != "" {
			t.Fatalf("STRATA_REQUIRE_GPU is set: %v", err)
		}
		t.Skipf("no CUDA driver: %v", err)
	}
	rows, err := measure(0, 8<<20, 2)
	require.NoError(t, err)
	require.Len(t, rows, 6)
	for _, r := range rows {
		assert.Positive(t, r.GBs, "%+v", r)
	}
}

// The median of an even number of repetitions is the mean of the two
// middle ones, not the slower of them.
func TestMedianEven(t *testing.T) {
	assert.Equal(t, 15*time.Millisecond, median([]time.Duration{10 * time.Millisecond, 20 * time.Millisecond}))
	assert.Equal(t, 25*time.Millisecond, median([]time.Duration{10 * time.Millisecond, 20 * time.Millisecond, 30 * time.Millisecond, 90 * time.Millisecond}))
	assert.Equal(t, 20*time.Millisecond, median([]time.Duration{10 * time.Millisecond, 20 * time.Millisecond, 90 * time.Millisecond}))
}

// Bad flags are refused with exit status 2, naming the flag; -h exits 0.
func TestFlags(t *testing.T) {
	for args, want := range map[string]string{
		"-size 3":                   "-size",
		"-size 0":                   "-size",
		"-size 50%":                 "-size",
		"-reps 0":                   "-reps",
		"-reps 10001":               "-reps 10001: want 1 to 10000",
		"-reps 9223372036854775807": "-reps",
		"-device -1":                "-device",
		"extra":                     "unexpected arguments",
		"-size 1GiB x":              "unexpected arguments",
	} {
		_, err := parseFlags(strings.Fields(args), io.Discard)
		require.Error(t, err, args)
		assert.Contains(t, err.Error(), want, args)
	}
	o, err := parseFlags([]string{"-size", "8MiB", "-reps", "2", "-device", "1"}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, options{size: 8 << 20, reps: 2, device: 1}, o)
	_, err = parseFlags([]string{"-h"}, io.Discard)
	require.ErrorIs(t, err, flag.ErrHelp)
}
