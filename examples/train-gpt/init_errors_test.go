package main

import (
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/tensor"
)

// TestInitErrors: -init of a truncated file says so (before any work,
// TestBadInputExitsTwo) without the hint
// about the model's shapes (which only a names or shapes mismatch gets),
// and weights with a NaN are refused at load naming the tensor (they used
// to fail at step 1, blaming the data or -lr).
func TestInitErrors(t *testing.T) {
	dir := t.TempDir()
	w := filepath.Join(dir, "w.safetensors")
	common := []string{"-steps", "1", "-batch", "2", "-device", "cpu", "-quiet", "-eval-every", "0", "-loss-plot", "off"}
	o, err := parseFlags(append(common, "-out", w))
	require.NoError(t, err)
	require.NoError(t, run(o))
	b, err := os.ReadFile(w)
	require.NoError(t, err)
	trunc := filepath.Join(dir, "trunc.safetensors")
	require.NoError(t, os.WriteFile(trunc, b[:len(b)/2], 0o644))
	nan := filepath.Join(dir, "nan.safetensors")
	c := tensor.NewCtx()
	c.WithScope(func() {
		ts, md, err := c.ReadSafetensors(w, tensor.CPU())
		require.NoError(t, err)
		v := ts["transformer.h.1.mlp.c_proj.weight"].Float64s()
		v[3] = math.NaN()
		ts["transformer.h.1.mlp.c_proj.weight"] = c.FromFloats(tensor.CPU(), tensor.Float32, v, ts["transformer.h.1.mlp.c_proj.weight"].Shape()...)
		require.NoError(t, tensor.WriteSafetensors(nan, ts, md))
	})
	const hint = "the file's shapes must be its own"
	for path, want := range map[string]string{
		trunc: "-init " + trunc + ": truncated: ",
		nan:   `-init ` + nan + `: nn: loading ` + nan + `: (nanogpt layout) "transformer.h.1.mlp.c_proj.weight": element 3 of [128 512] is NaN: the weights are not finite: invalid argument`,
	} {
		o, err := parseFlags(append(common, "-out", "", "-init", path))
		require.NoError(t, err)
		err = run(o)
		require.ErrorContains(t, err, want)
		require.NotContains(t, err.Error(), hint)
	}
	o, err = parseFlags(append(common, "-out", "", "-init", w, "-vocab", "300"))
	require.NoError(t, err)
	require.ErrorContains(t, run(o), hint, "a shape mismatch keeps the hint")
}
