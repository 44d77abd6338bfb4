package main

import (
	"encoding/json"
	"image/png"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/tensor"
)

func TestMemoryCaptureWritesTraceAndPictures(t *testing.T) {
	dir := t.TempDir()
	trace, plot := filepath.Join(dir, "m.json"), filepath.Join(dir, "m.png")
	o, err := parseFlags([]string{"-config", "tiny", "-device", "cpu", "-batch", "4", "-memory-step", "2",
		"-memory-trace", trace, "-memory-plot", plot})
	require.NoError(t, err)
	require.NoError(t, run(o))
	for _, p := range []string{trace, filepath.Join(dir, "m.snapshot.json")} {
		data, err := os.ReadFile(p)
		require.NoError(t, err)
		var v map[string]any
		require.NoError(t, json.Unmarshal(data, &v), p)
	}
	for _, p := range []string{plot, filepath.Join(dir, "m-segments.png")} {
		f, err := os.Open(p)
		require.NoError(t, err)
		img, err := png.Decode(f)
		f.Close()
		require.NoError(t, err, p)
		assert.Greater(t, img.Bounds().Dx(), 500)
	}
	o.memStep = 0
	assert.ErrorContains(t, run(o), "-memory-step 0")
}

// The recorded step is an eager one: under -cuda-graph auto a captured
// step's replay allocates nothing, and its timeline was flat (session
// 42's gpt2 plot on the H100: 6 events, 1.28 GiB allocated under 7.09
// GiB reserved); -cuda-graph on is refused with the reason.
func TestMemoryCaptureRecordsAnEagerStep(t *testing.T) {
	o, err := parseFlags([]string{"-config", "tiny", "-device", "cpu", "-memory-plot", "m.png"})
	require.NoError(t, err)
	use, err := o.graphUse(tensor.CPU(), 0)
	require.NoError(t, err)
	require.False(t, use)
	o.graph = "on"
	_, err = o.graphUse(tensor.CPU(), 0)
	require.ErrorContains(t, err, "-cuda-graph on: -memory-trace and -memory-plot record the allocations of a step")
}

func TestGPUMemoryCaptureRecordsAnEagerStep(t *testing.T) {
	gpuOrSkip(t, 1)
	trace := filepath.Join(t.TempDir(), "m.json")
	o, err := parseFlags([]string{"-config", "tiny", "-device", "cuda", "-memory-step", "3", "-memory-trace", trace})
	require.NoError(t, err)
	require.NoError(t, run(o))
	data, err := os.ReadFile(trace)
	require.NoError(t, err)
	var v struct {
		TraceEvents []struct {
			Name string `json:"name"`
		} `json:"traceEvents"`
	}
	require.NoError(t, json.Unmarshal(data, &v))
	counters := 0
	for _, e := range v.TraceEvents {
		if e.Name == "allocated" {
			counters++
		}
	}
	require.Greater(t, counters, 100, "allocation counters of the recorded step")
}
