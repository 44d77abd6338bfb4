package nn_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/nn"
	"github.com/strata-ml/strata/tensor"
)

// TestFusedHeadLoss: the fused, chunked head gives the full head's losses
// and gradients (float32, within rounding) over three AdamW steps with
// dropout on and checkpointing too, and its step peaks lower by about the
// logits and their gradient.
func TestFusedHeadLoss(t *testing.T) {
	cfg := nn.GPTConfig{Vocab: 300, Context: 8, Layers: 2, Heads: 2, Width: 16, Dropout: 0.2}
	newGPT := func(h nn.HeadLoss, ck nn.Checkpointing) *nn.GPT {
		g, err := nn.NewGPT(cfg, nn.Options{Device: tensor.CPU(), DType: tensor.Float32, Rng: rand.New(rand.NewPCG(4, 4))})
		require.NoError(t, err)
		g.HeadLoss, g.Checkpoint = h, ck
		return g
	}
	base := newGPT(nn.HeadLoss{}, nn.Checkpointing{})
	wantLoss, wantGrads := stepBits(t, base, 3)
	nn.Release(base.Parameters())
	for name, c := range map[string]struct {
		h  nn.HeadLoss
		ck nn.Checkpointing
	}{
		"fused":                 {nn.HeadLoss{Fused: true}, nn.Checkpointing{}},
		"fused, 5 rows a chunk": {nn.HeadLoss{Fused: true, ChunkRows: 5}, nn.Checkpointing{}},
		"fused, checkpointed":   {nn.HeadLoss{Fused: true, ChunkRows: 7}, nn.Checkpointing{Mode: nn.CheckpointBlocks}},
	} {
		g := newGPT(c.h, c.ck)
		losses, grads := stepBits(t, g, 3)
		nn.Release(g.Parameters())
		require.Len(t, losses, len(wantLoss))
		for i := range losses {
			assert.InDelta(t, math.Float32frombits(wantLoss[i]), math.Float32frombits(losses[i]), 2e-6, "%s: loss %d", name, i)
		}
		require.Len(t, grads, len(wantGrads), name)
		for i := range wantGrads {
			for j := range wantGrads[i] {
				w, got := math.Float32frombits(wantGrads[i][j]), math.Float32frombits(grads[i][j])
				require.InDelta(t, w, got, 2e-5+1e-3*math.Abs(float64(w)), "%s: gradient %d[%d]", name, i, j)
			}
		}
	}
	require.Zero(t, tensor.LeakedTensors())
}

// TestFusedHeadPeak: with a vocabulary large against the model, the fused
// head's step peak (all roles) is lower by about the logits and their
// gradient.
func TestFusedHeadPeak(t *testing.T) {
	cfg := nn.GPTConfig{Vocab: 4096, Context: 32, Layers: 1, Heads: 2, Width: 16}
	const B = 4
	logits := int64(B * cfg.Context * cfg.Vocab * 4) // 2 MiB
	peak := func(h nn.HeadLoss) int64 {
		g, err := nn.NewGPT(cfg, nn.Options{Device: tensor.CPU(), DType: tensor.Float32, Rng: rand.New(rand.NewPCG(5, 5))})
		require.NoError(t, err)
		g.HeadLoss = h
		defer nn.Release(g.Parameters())
		mem := tensor.CPU().Memory()
		xs := make([]int32, B*cfg.Context)
		for i := range xs {
			xs[i] = int32(i * 7 % cfg.Vocab)
		}
		c := tensor.NewCtx()
		var p int64
		require.NoError(t, tensor.Try(func() {
			c.WithScope(func() {
				x, y := c.FromInt32s(tensor.CPU(), xs, B, cfg.Context), c.FromInt32s(tensor.CPU(), xs, B, cfg.Context)
				mem.ResetPeaks()
				base := mem.Stats().Total.Requested.Current
				loss := g.Loss(x, y)
				require.NoError(t, loss.Backward())
				p = mem.Stats().Total.Requested.Peak - base
				nn.ZeroGrad(g.Parameters())
			})
		}))
		return p
	}
	full, fused := peak(nn.HeadLoss{}), peak(nn.HeadLoss{Fused: true, ChunkRows: 16})
	t.Logf("step peak above the model: full head %s, fused %s (logits %s)", memory.FormatBytes(full), memory.FormatBytes(fused), memory.FormatBytes(logits))
	assert.Less(t, fused, full-logits, "the fused head saves more than the logits")
}

func TestParseHeadLoss(t *testing.T) {
	h, err := nn.ParseHeadLoss("fused")
	require.NoError(t, err)
	assert.Equal(t, nn.HeadLoss{Fused: true}, h)
	assert.Equal(t, "fused", h.String())
	h, err = nn.ParseHeadLoss("full")
	require.NoError(t, err)
	assert.Equal(t, "full", h.String())
	assert.Equal(t, "fused(8 rows)", nn.HeadLoss{Fused: true, ChunkRows: 8}.String())
	_, err = nn.ParseHeadLoss("half")
	require.Error(t, err)
}
