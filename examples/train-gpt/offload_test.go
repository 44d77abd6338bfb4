package main

import "testing"

// On the GPU: checkpointed blocks that wait in pinned host memory between
// the passes (-checkpoint-offload: copies on the copy stream, fenced at
// first use) give the losses of the same checkpointing on the device, bit
// for bit, in float32 and bf16, selective and whole blocks; and on the
// CPU, where the moves are plain copies between host tiers. On the GPU it
// runs on expandable segments (the default since session 24; the losses
// differed there until session 21: staged uploads, tensor/cuda_stage.go)
// and, with STRATA_EXPANDABLE_SEGMENTS=0, on classic ones.
func TestCheckpointOffloadSameLosses(t *testing.T) {
	onCPUAndGPU(t, func(t *testing.T, dev string) {
		for _, args := range [][]string{
			{"-precision", "fp32", "-checkpoint", "selective"},
			{"-precision", "bf16", "-checkpoint", "blocks"},
			{"-precision", "bf16", "-checkpoint", "selective", "-checkpoint-every", "2"},
		} {
			base := append([]string{"-device", dev, "-config", "char", "-cuda-graph", "off"}, args...)
			ref := dpRun(t, false, base...)
			compareLosses(t, ref, dpRun(t, false, append(base, "-checkpoint-offload")...), 0, "-checkpoint-offload")
		}
	})
}

// onCPUAndGPU runs fn as subtests on the CPU and, unless -short, on one
// GPU (skipped without one, failed under STRATA_REQUIRE_GPU).
func onCPUAndGPU(t *testing.T, fn func(t *testing.T, dev string)) {
	devices := []string{"cpu"}
	if !testing.Short() {
		devices = append(devices, "cuda")
	}
	for _, dev := range devices {
		t.Run(dev, func(t *testing.T) {
			if dev == "cuda" {
				gpuOrSkip(t, 1)
			}
			fn(t, dev)
		})
	}
}
