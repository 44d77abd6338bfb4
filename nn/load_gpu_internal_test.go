package nn

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/tensor"
)

// TestGPULoadWeightsInChunks: on a GPU, where the staging buffer is
// mapped pinned memory that the host writes while the device may still
// read the chunk before (the stager waits for it), LoadWeights gives the
// bits the old path gives, in both layouts, from a float32 file to
// float32 and bfloat16 parameters, in chunks of a few elements (the
// buffer reused many times a tensor) and whole. Skipped without a GPU
// (fails without one when STRATA_REQUIRE_GPU is set).
func TestGPULoadWeightsInChunks(t *testing.T) {
	dev := gpuOrSkip(t)
	defer func(n int) { loadChunk = n }(loadChunk)
	vals := chunkValues(11)
	for _, layout := range []Layout{LayoutNanoGPT, LayoutHF} {
		path := filepath.Join(t.TempDir(), "w.safetensors")
		require.NoError(t, SaveWeightsLayout(context.Background(), path, chunkParams(t, tensor.CPU(), tensor.Float32, vals), nil, layout))
		for _, to := range []tensor.DType{tensor.Float32, tensor.BFloat16} {
			want := oldLoad(t, path, chunkParams(t, tensor.CPU(), to, vals), layout)
			for _, chunk := range []int{4, 40, 16 << 20} {
				loadChunk = chunk
				ps := chunkParams(t, dev, to, chunkValues(12))
				_, got, err := LoadWeightsLayout(path, ps, LayoutAuto)
				require.NoError(t, err, "%v to %v, chunk %d", layout, to, chunk)
				require.Equal(t, layout, got)
				require.Equal(t, want, paramBits(ps), "%v to %v, chunk %d: the old path's bits", layout, to, chunk)
			}
		}
	}
}

// TestGPULoadTrainStateInChunks: LoadTrainState on a GPU in chunks of 16
// elements (the 10x10 weights and moments take 7 chunks each, the
// buffer reused ~60 times), checks included: a bad value in a tensor's
// last chunk is refused and changes nothing, and the state loads
// exactly.
func TestGPULoadTrainStateInChunks(t *testing.T) {
	dev := gpuOrSkip(t)
	defer func(n int) { loadChunk = n }(loadChunk)
	loadChunk = 64
	ps, opt, path, want := trainStateFixture(t, dev, dev)
	for _, p := range ps {
		p.Value.Fill(7)
	}
	_, err := LoadTrainState(rewrite(t, path, ExpAvgSqPrefix+"l1.weight", -1), ps, opt)
	require.ErrorIs(t, err, tensor.ErrArgument)
	require.ErrorContains(t, err, "negative entry")
	for _, p := range ps {
		for _, x := range p.Value.Float32s() {
			require.Equal(t, float32(7), x, "%s changed by a refused load", p.Name)
		}
	}
	_, err = LoadTrainState(path, ps, opt)
	require.NoError(t, err)
	requireState(t, ps, opt, want, "loaded in chunks on the GPU")
}

// gpuOrSkip returns cuda:0, or skips the test without one (fails when
// STRATA_REQUIRE_GPU is set).
func gpuOrSkip(t *testing.T) tensor.Device {
	t.Helper()
	dev, err := tensor.CUDA(0)
	if err != nil {
		if os.Getenv("STRATA_REQUIRE_GPU") != "" {
			t.Fatalf("STRATA_REQUIRE_GPU is set: %v", err)
		}
		t.Skipf("no CUDA device: %v", err)
	}
	return dev
}
