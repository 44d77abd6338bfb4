package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/tensor"
)

// TestFP16SkippedOverflowKeepsSmoothedLoss: under fp16 a step whose
// forward pass overflows float16 (an activation past 65504 cast for a
// product) has a non-finite loss and non-finite gradients, and the
// gradient scaler skips it; the run goes on. Its loss was folded into
// the smoothed loss, which stayed NaN for the rest of the run: every
// progress line said "loss NaN" and the training state saved after it
// was refused by -resume (a smoothed loss is a mean of finite losses);
// the -loss-log line said "loss": NaN, which is not JSON; and the run
// ended in an error after its last step, the loss plot refusing the NaN
// point.
func TestFP16SkippedOverflowKeepsSmoothedLoss(t *testing.T) {
	dir := t.TempDir()
	// Text in which 'z' is rare: only the batches that draw it overflow.
	var b strings.Builder
	for i := range 600 {
		if i%50 == 7 {
			b.WriteString("zzzz zzzz zzzz\n")
			continue
		}
		fmt.Fprintf(&b, "line %d: the quick brown fox %d jumps over %d idle dogs.\n", i, i*7%13, i%5)
	}
	text := filepath.Join(dir, "text.txt")
	require.NoError(t, os.WriteFile(text, []byte(b.String()), 0o644))
	common := []string{"-device", "cpu", "-quiet", "-config", "tiny", "-batch", "4", "-data", text, "-eval-every", "0"}

	// Weights whose first block's norm overflows float16 for 'z' alone:
	// its embedding a large one-hot, the norm's gain on that axis 6000
	// (about 11 standard deviations there: 68000; other tokens' few:
	// finite).
	w0 := filepath.Join(dir, "w0.safetensors")
	o, err := parseFlags(append(common, "-steps", "1", "-out", w0))
	require.NoError(t, err)
	require.NoError(t, run(o))
	ts, meta, err := tensor.ReadSafetensors(w0, tensor.CPU())
	require.NoError(t, err)
	edit := func(name string, f func(v []float32)) {
		p, ok := ts[name]
		require.True(t, ok, "%s in %v", name, meta)
		v := p.Float32s()
		f(v)
		ts[name] = tensor.FromFloat32s(tensor.CPU(), v, p.Shape()...)
	}
	edit("transformer.wte.weight", func(v []float32) {
		row := v['z'*128 : 'z'*128+128]
		clear(row)
		row[0] = 100
	})
	edit("transformer.h.0.ln_1.weight", func(v []float32) { v[0] = 6000 })
	w1 := filepath.Join(dir, "w1.safetensors")
	require.NoError(t, tensor.WriteSafetensors(w1, ts, meta))

	state, lossLog := filepath.Join(dir, "state.safetensors"), filepath.Join(dir, "loss.jsonl")
	o, err = parseFlags(append(common, "-precision", "fp16", "-init", w1, "-steps", "12", "-save-every", "12",
		"-out", filepath.Join(dir, "w.safetensors"), "-state", state, "-lr", "1e-4", "-loss-log", lossLog))
	require.NoError(t, err)
	require.NoError(t, run(o), "the loss plot drew the skipped step's NaN")
	md, err := tensor.ReadSafetensorsMetadata(state)
	require.NoError(t, err)
	t.Logf("skipped %s, smooth %s", md["amp.skipped"], md[keySmooth])
	skipped, err := strconv.Atoi(md["amp.skipped"])
	require.NoError(t, err)
	require.Positive(t, skipped, "no step overflowed: the test's weights no longer do what it needs")
	smooth, err := strconv.ParseFloat(md[keySmooth], 64)
	require.NoError(t, err)
	require.False(t, math.IsNaN(smooth) || math.IsInf(smooth, 0), "smoothed loss %v after %d skipped steps", smooth, skipped)
	// One JSON line per step, the skipped ones' loss null.
	lines := strings.Split(strings.TrimSpace(string(readFile(t, lossLog))), "\n")
	require.Len(t, lines, 12)
	nulls := 0
	for _, l := range lines {
		var v map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &v), l)
		if v["loss"] == nil {
			nulls++
		}
	}
	require.Positive(t, nulls)
	require.LessOrEqual(t, nulls, skipped)
}
