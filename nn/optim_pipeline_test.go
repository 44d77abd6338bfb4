package nn_test

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/amp"
	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/nn"
	"github.com/strata-ml/strata/tensor"
)

// trainPipelined trains a small GPT for a few steps with AdamW, clipping
// every step (a small max norm, so that the gradients are scaled), plain
// or pipelined (pipeline, in launches of at most width blocks striding
// over a group's rows; 0: the default grid), and returns
// the losses and the final weights. Pipelined, it checks after each Step
// that every gradient was released and that the gradients' bytes left the
// device's allocated memory.
func trainPipelined(t *testing.T, dev tensor.Device, prec amp.State, pipeline bool, width int) ([]float64, [][]float32) {
	t.Helper()
	return trainAdamW(t, dev, prec, trainRun{
		checkpoint: true,
		maxNorm:    0.05,
		optimizer:  func(opt *nn.AdamW) { opt.Pipeline, opt.PipelineWidth = pipeline, width },
		released:   pipeline,
		wait:       true,
	})
}

// TestAdamWPipelineSameBits: a pipelined optimizer gives the losses and
// weights of the plain one, bit for bit, with the default grid and with
// one block striding over each group's rows; on a GPU the next forward
// pass runs beside the
// update (STRATA_REQUIRE_GPU=1 makes the GPU half required).
func TestAdamWPipelineSameBits(t *testing.T) {
	check := func(t *testing.T, dev tensor.Device, prec amp.State) {
		l0, w0 := trainPipelined(t, dev, prec, false, 0)
		for _, width := range []int{0, 1} {
			l1, w1 := trainPipelined(t, dev, prec, true, width)
			require.Equal(t, l0, l1, "losses, width %d", width)
			require.Equal(t, w0, w1, "weights, width %d", width)
		}
	}
	onCPUAndCUDA(t, check)
}

// TestPipelineGroups: a GPT's pipelined update runs its embeddings, each
// block and its final norm as groups, in order; parameters of no numbered
// layer are split once a group passes a 32nd of the bytes (4 MiB at
// least); Sequential's layers are groups of their own.
func TestPipelineGroups(t *testing.T) {
	cfg := nn.GPTConfig{Vocab: 64, Context: 32, Layers: 3, Heads: 2, Width: 64}
	g, err := nn.NewGPT(cfg, nn.Options{Rng: rand.New(rand.NewPCG(1, 2))})
	require.NoError(t, err)
	ps := g.Parameters()
	defer nn.Release(ps)
	ends, err := nn.PipelineGroups(ps)
	require.NoError(t, err)
	require.Len(t, ends, 5, "wte and wpe, 3 blocks, ln_f")
	require.Equal(t, len(ps), ends[4])
	require.Equal(t, "transformer.wpe.weight", ps[ends[0]-1].Name)
	for i := range 3 {
		lo, hi := ends[i], ends[i+1]
		require.Equal(t, 12, hi-lo, "block %d", i)
		for _, p := range ps[lo:hi] {
			require.Contains(t, p.Name, "transformer.h."+string(rune('0'+i))+".", "block %d", i)
		}
	}
	require.Equal(t, "transformer.ln_f.weight", ps[ends[3]].Name)

	param := func(name string, n int) *nn.Parameter {
		return &nn.Parameter{Var: autograd.Param(tensor.Zeros(tensor.CPU(), tensor.Float32, n), name), Name: name}
	}
	mk := []*nn.Parameter{
		param("wte.weight", 5<<18), // 5 MiB: past the 4 MiB a group of unnumbered parameters
		param("wpe.weight", 16),
		param("extra.weight", 16),
		param("h.10.a", 8), param("h.10.b", 8),
		param("h.11.a", 8),
		param("0.weight", 8), param("0.bias", 8), param("2.weight", 8),
		param("ln_f.weight", 8),
	}
	defer nn.Release(mk)
	ends, err = nn.PipelineGroups(mk)
	require.NoError(t, err)
	require.Equal(t, []int{1, 3, 5, 6, 8, 9, 10}, ends)
	ends, err = nn.PipelineGroups(nil)
	require.NoError(t, err)
	require.Empty(t, ends)
}
