package amp_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/amp"
	"github.com/strata-ml/strata/tensor"
)

func TestParsePrecision(t *testing.T) {
	want := map[string]amp.State{
		"fp32": {}, "tf32": {TF32: true},
		"fp16": {Enabled: true, DType: tensor.Float16}, "bf16": {Enabled: true, DType: tensor.BFloat16},
	}
	for _, name := range amp.Precisions {
		s, err := amp.ParsePrecision(name)
		require.NoError(t, err)
		assert.Equal(t, want[name], s, name)
	}
	_, err := amp.ParsePrecision("fp8")
	require.EqualError(t, err, `amp: precision "fp8": want fp32, tf32, fp16 or bf16`)
}

// TestParsePrecisionAnyCase: the names read in any case, as
// tensor.ParseDType reads "BF16".
func TestParsePrecisionAnyCase(t *testing.T) {
	for s, want := range map[string]amp.State{
		"FP32": {}, "Tf32": {TF32: true},
		"FP16": {Enabled: true, DType: tensor.Float16}, "Bf16": {Enabled: true, DType: tensor.BFloat16},
	} {
		got, err := amp.ParsePrecision(s)
		require.NoError(t, err, s)
		assert.Equal(t, want, got, s)
	}
}
