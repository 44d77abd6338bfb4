package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// -cuda-graph takes on, off or auto; on fails with the reason where the
// run cannot be captured (on -device cpu, as a bad flag).
func TestCUDAGraphFlags(t *testing.T) {
	_, err := parseFlags([]string{"-cuda-graph", "yes"})
	require.ErrorContains(t, err, `-cuda-graph "yes": want on, off or auto`)
	_, err = parseFlags([]string{"-device", "cpu", "-cuda-graph", "on", "-steps", "1"})
	require.ErrorContains(t, err, "-cuda-graph on: CUDA graphs need a CUDA device") // a flag error, before any work
}

// On the GPU the step replayed from a CUDA graph gives the losses of the
// ordinary step bit for bit: float32 and bf16, with block checkpointing
// and the gradient clipped every step (-clip 0.05), tf32 with clipping
// off, and fp16 under the gradient scaler.
func TestGPUCUDAGraphSameLosses(t *testing.T) {
	gpuOrSkip(t, 1)
	for _, args := range [][]string{
		{"-precision", "fp32"},
		{"-precision", "bf16", "-checkpoint", "blocks", "-clip", "0.05"},
		{"-precision", "tf32", "-clip", "0"},
		{"-precision", "fp16", "-clip", "0.05"}, // the scaler's first steps overflow and skip
	} {
		base := append([]string{"-device", "cuda"}, args...)
		ref := dpRun(t, false, append(base, "-cuda-graph", "off")...)
		compareLosses(t, ref, dpRun(t, false, append(base, "-cuda-graph", "on")...), 0, "-cuda-graph on")
	}
}
