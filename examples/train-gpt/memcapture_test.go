package main

import (
	"encoding/json"
	"image/png"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
