package main

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/strata-ml/strata/nn"
)

// GPT-2 small trains at about 0.86 GFLOP a token (issue 11's figure,
// nanoGPT's estimate_mfu); peaks are known for the H200 and the A100.
func TestModelFlopsAndPeaks(t *testing.T) {
	cfg := nn.GPTConfigs["gpt2"]
	f := flopsPerToken(cfg, 124439808)
	assert.InDelta(t, 855.1e6, f, 0.1e6)
	assert.Equal(t, 989.4e12, peakFLOPS("NVIDIA H200", "bf16"))
	assert.Equal(t, 494.7e12, peakFLOPS("NVIDIA H100 80GB HBM3", "tf32"))
	assert.Equal(t, 19.5e12, peakFLOPS("NVIDIA A100-SXM4-80GB", "fp32"))
	assert.Zero(t, peakFLOPS("NVIDIA GeForce RTX 3090", "fp16"), "unknown parts report no MFU")
}
