package nn_test

import (
	"math"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/amp"
	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/checkpoint"
	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/nn"
	"github.com/strata-ml/strata/tensor"
)

// checkpointings are the modes the tests compare with no checkpointing.
var checkpointings = map[string]nn.Checkpointing{
	"every block":            {Mode: nn.CheckpointBlocks},
	"every 2nd block":        {Mode: nn.CheckpointBlocks, Every: 2},
	"selective":              {Mode: nn.CheckpointSelective},
	"selective, 2nd blocks":  {Mode: nn.CheckpointSelective, Every: 2},
	"selective, norms kept":  {Mode: nn.CheckpointSelective, Policy: checkpoint.SaveOps("LayerNorm", "Gelu")},
	"selective, offloaded":   {Mode: nn.CheckpointSelective, Offload: true},
	"every block, offloaded": {Mode: nn.CheckpointBlocks, Offload: true},
}

// stepBits trains g for n AdamW steps on fixed random batches in context
// c (dropout on, training mode) and returns every step's loss and, after
// each step's backward, every parameter's gradient, as bits.
func stepBits(t *testing.T, g *nn.GPT, n int) (losses []uint32, grads [][]uint32) {
	t.Helper()
	c := tensor.NewCtx()
	ps := g.Parameters()
	opt := nn.NewAdamW(ps, 1e-2, 0.1)
	defer opt.Release()
	rng := rand.New(rand.NewPCG(3, 3))
	B, T, V := 3, g.Config.Context, g.Config.Vocab
	xs, ys := make([]int32, B*T), make([]int32, B*T)
	for range n {
		for i := range xs {
			xs[i], ys[i] = int32(rng.IntN(V)), int32(rng.IntN(V))
		}
		err := tensor.Try(func() {
			c.WithScope(func() {
				loss := g.Loss(c.FromInt32s(tensor.CPU(), xs, B, T), c.FromInt32s(tensor.CPU(), ys, B, T))
				require.NoError(t, loss.Backward())
				losses = append(losses, math.Float32bits(loss.Value.Float32s()[0]))
				for _, p := range ps {
					require.NotNil(t, p.Grad, p.Name)
					var bits []uint32
					for _, v := range p.Grad.Float32s() {
						bits = append(bits, math.Float32bits(v))
					}
					grads = append(grads, bits)
				}
				require.NoError(t, opt.Step())
				nn.ZeroGrad(ps)
			})
		})
		require.NoError(t, err)
	}
	require.Zero(t, c.BytesInUse(), "bytes left in the step's context")
	return losses, grads
}

// TestCheckpointBitIdentical: with dropout on and in training mode, every
// checkpointing mode gives the losses and every parameter's gradient of
// the plain model, bit for bit, over three optimizer steps.
func TestCheckpointBitIdentical(t *testing.T) {
	cfg := nn.GPTConfig{Vocab: 19, Context: 8, Layers: 3, Heads: 2, Width: 16, Dropout: 0.2}
	newGPT := func() *nn.GPT {
		g, err := nn.NewGPT(cfg, nn.Options{Device: tensor.CPU(), DType: tensor.Float32, Rng: rand.New(rand.NewPCG(4, 4))})
		require.NoError(t, err)
		return g
	}
	base := newGPT()
	wantLoss, wantGrads := stepBits(t, base, 3)
	nn.Release(base.Parameters())
	for name, ck := range checkpointings {
		g := newGPT()
		g.Checkpoint = ck
		losses, grads := stepBits(t, g, 3)
		nn.Release(g.Parameters())
		require.Equal(t, wantLoss, losses, "%s: losses", name)
		require.Len(t, grads, len(wantGrads), name)
		for i := range wantGrads {
			require.Equal(t, wantGrads[i], grads[i], "%s: gradient %d (step %d)", name, i%len(g.Parameters()), i/len(g.Parameters()))
		}
	}
	require.Zero(t, tensor.LeakedTensors())
}

// TestCheckpointSteadyState: DESIGN.md's lifetime rule holds with
// checkpointing (recomputation, saved outputs and all).
func TestCheckpointSteadyState(t *testing.T) {
	for name, ck := range checkpointings {
		cfg := nn.GPTConfig{Vocab: 17, Context: 8, Layers: 2, Heads: 2, Width: 16, Dropout: 0.1}
		before := settledInUse()
		g, err := nn.NewGPT(cfg, nn.Options{Device: tensor.CPU(), DType: tensor.Float32, Rng: rand.New(rand.NewPCG(1, 2))})
		require.NoError(t, err)
		g.Checkpoint = ck
		inUse := trainSteps(t, g, 20)
		for i, b := range inUse {
			require.Equal(t, inUse[0], b, "%s: bytes in use after step %d differ from step 1", name, i+1)
		}
		st := tensor.CPU().Memory().Stats()
		require.Zero(t, st.Roles[memory.RoleActivation].Requested.Current, "%s: no activation outlives its step", name)
		require.Zero(t, st.Roles[memory.RoleGradient].Requested.Current, "%s: gradients were released by ZeroGrad", name)
		nn.Release(g.Parameters())
		require.Equal(t, before, tensor.CPU().Memory().InUse(), "%s: everything returned", name)
	}
	require.Zero(t, tensor.LeakedTensors())
}

// activationBytes runs one forward and backward pass of g on a (B, T)
// batch and returns the activation bytes held at the end of the forward
// pass and the activation peak of the step, from the memory statistics
// by role (requested bytes, so exact).
func activationBytes(t *testing.T, g *nn.GPT, B, T int) (held, peak int64) {
	return activationBytesAmp(t, g, B, T, amp.State{})
}

// activationBytesAmp is activationBytes with the forward pass under
// autocast state st.
func activationBytesAmp(t *testing.T, g *nn.GPT, B, T int, st amp.State) (held, peak int64) {
	mem := tensor.CPU().Memory()
	act := func() memory.Stat { return mem.Stats().Roles[memory.RoleActivation].Requested }
	xs, ys := make([]int32, B*T), make([]int32, B*T)
	for i := range xs {
		xs[i], ys[i] = int32(i%g.Config.Vocab), int32((i+1)%g.Config.Vocab)
	}
	c := tensor.NewCtx()
	err := tensor.Try(func() {
		c.WithScope(func() {
			x, y := c.FromInt32s(tensor.CPU(), xs, B, T), c.FromInt32s(tensor.CPU(), ys, B, T)
			mem.ResetPeaks()
			base := act().Current
			var loss *autograd.Var
			amp.With(c, st, func() { loss = g.Loss(x, y) })
			held = act().Current - base
			require.NoError(t, loss.Backward())
			peak = act().Peak - base
			nn.ZeroGrad(g.Parameters())
		})
	})
	require.NoError(t, err)
	return held, peak
}

// TestCheckpointActivationPeak checks the activation memory of a 4-block
// GPT (B 2, T 16, C 32, 2 heads, vocab 64, no dropout) against what the
// shapes say. One unit is a (B, T, C) float32 tensor, U = 4096 bytes.
//
// Without checkpointing a block keeps A = 18 U + 512 bytes for backward:
// ln_1's output (1), the heads q, k, v (3), the attention output made
// contiguous (1), c_proj's output (1), the residual sum (1), ln_2's output
// (1), c_fc's output (4), the GELU output (4, MLP.KeepGelu), the MLP
// output (1), the block's output (1), and the two norms' mean and rstd
// (4 · B·T floats). Checkpointing every block keeps only each block's
// output (1 U), so at the end of the forward pass L·(A - U) fewer bytes
// are held. Since every activation is kept, the peak of the plain step is
// the end of its forward pass, where only the loss rows (4 · B·T bytes)
// are made after what it holds; with checkpointing, the peak is the
// recomputation of the last block on top of the L block outputs. The
// default selective policy (checkpoint.SaveMatMulsUpTo 3 U) keeps per
// block the c_attn output (3), the attention output (1) and both c_proj
// outputs (2), and recomputes c_fc's (4) and the GELU, plus the block
// output (1): L·(A - 7 U) fewer bytes held; checkpoint.SaveMatMuls keeps
// c_fc's too: L·(A - 11 U).
func TestCheckpointActivationPeak(t *testing.T) {
	cfg := nn.GPTConfig{Vocab: 64, Context: 16, Layers: 4, Heads: 2, Width: 32}
	const B, T = 2, 16
	U := int64(B * T * cfg.Width * 4)
	A := 18*U + 2*2*B*T*4
	L := int64(cfg.Layers)
	g, err := nn.NewGPT(cfg, nn.Options{Device: tensor.CPU(), DType: tensor.Float32, Rng: rand.New(rand.NewPCG(1, 2))})
	require.NoError(t, err)
	defer nn.Release(g.Parameters())
	heldNone, peakNone := activationBytes(t, g, B, T)
	g.Checkpoint = nn.Checkpointing{Mode: nn.CheckpointBlocks}
	heldBlocks, peakBlocks := activationBytes(t, g, B, T)
	g.Checkpoint = nn.Checkpointing{Mode: nn.CheckpointSelective}
	heldSel, peakSel := activationBytes(t, g, B, T)
	g.Checkpoint = nn.Checkpointing{Mode: nn.CheckpointSelective, Policy: checkpoint.SaveMatMuls}
	heldAll, _ := activationBytes(t, g, B, T)
	t.Logf("activation bytes held after forward / peak: none %d / %d, blocks %d / %d, selective %d / %d",
		heldNone, peakNone, heldBlocks, peakBlocks, heldSel, peakSel)
	require.Equal(t, L*(A-U), heldNone-heldBlocks, "held after the forward pass, every block")
	require.Equal(t, L*(A-7*U), heldNone-heldSel, "held after the forward pass, selective")
	require.Equal(t, L*(A-11*U), heldNone-heldAll, "held after the forward pass, every product kept")
	for _, k := range []int64{1, 3} {
		g.Checkpoint = nn.Checkpointing{Mode: nn.CheckpointSelective, KeepWide: int(k)}
		held, _ := activationBytes(t, g, B, T)
		require.Equal(t, L*(A-7*U)-k*4*U, heldNone-held, "held after the forward pass, selective with %d wide products kept", k)
	}
	n, per := g.WideRegions()
	require.Equal(t, cfg.Layers, n)
	require.Equal(t, 4*U, per, "a wide product is four block inputs")
	g.Checkpoint = nn.Checkpointing{Mode: nn.CheckpointSelective, KeepWide: -1}
	heldWide, _ := activationBytes(t, g, B, T)
	require.Equal(t, heldAll, heldWide, "every wide product kept is SaveMatMuls")
	g.Checkpoint = nn.Checkpointing{Mode: nn.CheckpointSelective, Every: 2, KeepWide: 1}
	heldEvery2, _ := activationBytes(t, g, B, T)
	g.Checkpoint = nn.Checkpointing{Mode: nn.CheckpointSelective, Every: 2}
	heldEvery2None, _ := activationBytes(t, g, B, T)
	require.Equal(t, 4*U, heldEvery2-heldEvery2None, "every second block checkpointed, the last of them keeps its wide product")
	require.Equal(t, heldNone+4*B*T, peakNone, "peak without checkpointing: the end of the forward pass")
	require.Equal(t, int64(219008), peakNone-peakBlocks, "peak, every block (53.5 U less)")
	require.Less(t, peakSel, peakNone, "peak, selective")
}

// TestCheckpointOffloadDeviceBytes: with the checkpointed blocks' tensors
// offloaded, the device tier holds at the end of the forward pass only
// the last two blocks' (checkpoint.Offload's Keep) of what the same mode
// holds without offload; the rest waits in the staging tier.
func TestCheckpointOffloadDeviceBytes(t *testing.T) {
	cfg := nn.GPTConfig{Vocab: 64, Context: 16, Layers: 6, Heads: 2, Width: 32}
	const B, T = 2, 16
	U := int64(B * T * cfg.Width * 4)
	g, err := nn.NewGPT(cfg, nn.Options{Device: tensor.CPU(), DType: tensor.Float32, Rng: rand.New(rand.NewPCG(1, 2))})
	require.NoError(t, err)
	defer nn.Release(g.Parameters())
	mem := tensor.CPU().Memory()
	heldIn := func(ck nn.Checkpointing) (dev, staging int64) {
		g.Checkpoint = ck
		xs := make([]int32, B*T)
		c := tensor.NewCtx()
		require.NoError(t, tensor.Try(func() {
			c.WithScope(func() {
				x := c.FromInt32s(tensor.CPU(), xs, B, T)
				s0 := mem.Stats()
				loss := g.Loss(x, x)
				s1 := mem.Stats()
				dev = s1.Tiers[memory.TierDevice].Allocated.Current - s0.Tiers[memory.TierDevice].Allocated.Current
				staging = s1.Tiers[memory.TierStaging].Allocated.Current - s0.Tiers[memory.TierStaging].Allocated.Current
				require.NoError(t, loss.Backward())
				nn.ZeroGrad(g.Parameters())
			})
		}))
		return dev, staging
	}
	L := int64(cfg.Layers)
	for _, mode := range []nn.CheckpointMode{nn.CheckpointSelective, nn.CheckpointBlocks} {
		devKept, stKept := heldIn(nn.Checkpointing{Mode: mode, Policy: checkpoint.SaveMatMuls})
		if mode == nn.CheckpointBlocks {
			devKept, stKept = heldIn(nn.Checkpointing{Mode: mode})
		}
		devOff, stOff := heldIn(nn.Checkpointing{Mode: mode, Offload: true})
		per := 11 * U // SaveMatMuls: 10 U saved and the block's input (TestCheckpointActivationPeak)
		if mode == nn.CheckpointBlocks {
			per = U
		}
		require.Zero(t, stKept, "%v: nothing in staging without offload", mode)
		require.Equal(t, (L-2)*per, devKept-devOff, "%v: all but the last two blocks' moved", mode)
		require.Equal(t, (L-2)*per, stOff, "%v: and wait in the staging tier", mode)
		// OffloadKeep: 4 keeps the last four blocks' on the device, -1 none.
		for keep, kept := range map[int]int64{4: 4, -1: 0, 2: 2} {
			ck := nn.Checkpointing{Mode: mode, Offload: true, OffloadKeep: keep}
			dev, st := heldIn(ck)
			require.Equal(t, (L-kept)*per, devKept-dev, "%v: all but the last %d blocks' moved", ck, kept)
			require.Equal(t, (L-kept)*per, st, "%v: in the staging tier", ck)
		}
	}
}

// OffloadKeep's default and its negatives read as the checkpoint package
// does, in String and in the levels' comparison.
// TestCheckpointKeepWideSameLosses: keeping some blocks' wide products
// (KeepWide) changes no loss, with every block or every second one
// checkpointed; the setting reads in String and is no level of its own.
func TestCheckpointKeepWideSameLosses(t *testing.T) {
	cfg := microGPT
	cfg.Layers = 4
	train := func(ck nn.Checkpointing) []float64 {
		g, err := nn.NewGPT(cfg, nn.Options{Device: tensor.CPU(), DType: tensor.Float32, Rng: rand.New(rand.NewPCG(3, 1))})
		require.NoError(t, err)
		defer nn.Release(g.Parameters())
		g.Checkpoint = ck
		return trainIn(t, g, 4)
	}
	ref := train(nn.Checkpointing{})
	for _, ck := range []nn.Checkpointing{
		{Mode: nn.CheckpointSelective, KeepWide: 1},
		{Mode: nn.CheckpointSelective, KeepWide: 3},
		{Mode: nn.CheckpointSelective, KeepWide: -1},
		{Mode: nn.CheckpointSelective, Every: 2, KeepWide: 1},
	} {
		require.Equal(t, ref, train(ck), "%v", ck)
	}
	sel := nn.Checkpointing{Mode: nn.CheckpointSelective, KeepWide: 3}
	require.Equal(t, "selective (wide products kept in the last 3)", sel.String())
	require.Equal(t, "selective (every wide product kept)", nn.Checkpointing{Mode: nn.CheckpointSelective, KeepWide: -1}.String())
	require.Equal(t, "blocks", nn.Checkpointing{Mode: nn.CheckpointBlocks, KeepWide: 3}.String(), "only the selective mode keeps wide products")
	up, ok := sel.Raised()
	require.True(t, ok, "KeepWide tunes a level, it is not one")
	require.Equal(t, nn.Checkpointing{Mode: nn.CheckpointBlocks, Every: 2}, up)
}

func TestCheckpointingOffloadKeep(t *testing.T) {
	sel := nn.Checkpointing{Mode: nn.CheckpointSelective, Offload: true}
	require.Equal(t, "selective, offloaded", sel.String())
	sel.OffloadKeep = 2
	require.Equal(t, "selective, offloaded", sel.String(), "2 is the default")
	sel.OffloadKeep = 4
	require.Equal(t, "selective, offloaded (keep 4)", sel.String())
	sel.OffloadKeep = -3
	require.Equal(t, "selective, offloaded (keep 0)", sel.String())
	_, ok := sel.Raised()
	require.False(t, ok, "offloaded settings are not levels")
	require.Equal(t, "blocks every 2", nn.Checkpointing{Mode: nn.CheckpointBlocks, Every: 2, OffloadKeep: 5}.String(), "keep means nothing without offload")
}

// TestCheckpointConcurrent: two goroutines train checkpointed models in
// their own contexts (every block, selective) while a third trains the
// plain model; all three follow the same losses bit for bit, and each
// context's bytes stay level (trainIn checks).
func TestCheckpointConcurrent(t *testing.T) {
	n := 10
	base := settledInUse()
	plain, blocks, sel := newMicroGPT(t, 1), newMicroGPT(t, 1), newMicroGPT(t, 1)
	blocks.Checkpoint = nn.Checkpointing{Mode: nn.CheckpointBlocks}
	sel.Checkpoint = nn.Checkpointing{Mode: nn.CheckpointSelective}
	var wg sync.WaitGroup
	var lp, lb, ls []float64
	wg.Go(func() { lp = trainIn(t, plain, n) })
	wg.Go(func() { lb = trainIn(t, blocks, n) })
	wg.Go(func() { ls = trainIn(t, sel, n) })
	wg.Wait()
	require.Len(t, lp, n)
	require.Equal(t, lp, lb, "every block")
	require.Equal(t, lp, ls, "selective")
	for _, g := range []*nn.GPT{plain, blocks, sel} {
		nn.Release(g.Parameters())
	}
	assert.Equal(t, base, tensor.CPU().Memory().InUse())
}

func TestCheckpointingValidate(t *testing.T) {
	m, err := nn.ParseCheckpointMode("selective")
	require.NoError(t, err)
	require.Equal(t, nn.CheckpointSelective, m)
	require.Equal(t, "blocks", nn.CheckpointBlocks.String())
	_, err = nn.ParseCheckpointMode("all")
	require.ErrorContains(t, err, `"all"`)
	require.Error(t, nn.Checkpointing{Mode: nn.CheckpointBlocks, Every: -1}.Validate())
	require.Error(t, nn.Checkpointing{Mode: 7}.Validate())
	g := newMicroGPT(t, 1)
	defer nn.Release(g.Parameters())
	g.Checkpoint.Every = -2
	err = tensor.Try(func() {
		tensor.WithScope(func() { g.Forward(tensor.FromInt32s(tensor.CPU(), []int32{1, 2}, 1, 2)) })
	})
	require.ErrorIs(t, err, tensor.ErrArgument)
}

// TestCheckpointAutocast: under bfloat16 autocast (the forward pass in an
// autocast region, backward outside it, as train-gpt runs) every mode
// gives the plain model's loss and gradients bit for bit: the
// recomputation runs in the forward's autocast state.
func TestCheckpointAutocast(t *testing.T) {
	cfg := nn.GPTConfig{Vocab: 19, Context: 8, Layers: 2, Heads: 2, Width: 16, Dropout: 0.2}
	run := func(ck nn.Checkpointing) (loss uint32, grads [][]uint32) {
		g, err := nn.NewGPT(cfg, nn.Options{Device: tensor.CPU(), DType: tensor.Float32, Rng: rand.New(rand.NewPCG(4, 4))})
		require.NoError(t, err)
		defer nn.Release(g.Parameters())
		g.Checkpoint = ck
		c := tensor.NewCtx()
		xs, ys := make([]int32, 2*cfg.Context), make([]int32, 2*cfg.Context)
		for i := range xs {
			xs[i], ys[i] = int32(i*7%cfg.Vocab), int32(i*5%cfg.Vocab)
		}
		err = tensor.Try(func() {
			c.WithScope(func() {
				var l *autograd.Var
				amp.Autocast(c, tensor.BFloat16, func() {
					l = g.Loss(c.FromInt32s(tensor.CPU(), xs, 2, cfg.Context), c.FromInt32s(tensor.CPU(), ys, 2, cfg.Context))
				})
				require.NoError(t, l.Backward())
				loss = math.Float32bits(l.Value.Float32s()[0])
				for _, p := range g.Parameters() {
					var bits []uint32
					for _, v := range p.Grad.Float32s() {
						bits = append(bits, math.Float32bits(v))
					}
					grads = append(grads, bits)
				}
				nn.ZeroGrad(g.Parameters())
			})
		})
		require.NoError(t, err)
		require.Zero(t, c.BytesInUse())
		return loss, grads
	}
	wantLoss, wantGrads := run(nn.Checkpointing{})
	for name, ck := range checkpointings {
		loss, grads := run(ck)
		require.Equal(t, wantLoss, loss, name)
		require.Equal(t, wantGrads, grads, name)
	}
}

// Raised walks CheckpointLevels from none to every block, treating Every
// 0 and 1 alike, and stops at the last level and at settings off the list.
func TestCheckpointingRaised(t *testing.T) {
	c, steps := nn.Checkpointing{Every: 1}, 0 // what train-gpt's -checkpoint auto starts with
	for {
		next, ok := c.Raised()
		if !ok {
			break
		}
		steps++
		require.Equal(t, nn.CheckpointLevels[steps].String(), next.String())
		c = next
	}
	require.Equal(t, len(nn.CheckpointLevels)-1, steps)
	_, ok := nn.Checkpointing{Mode: nn.CheckpointBlocks, Every: 3}.Raised()
	require.False(t, ok, "blocks every 3 is not a level")
}

// TestCheckpointSelectiveUnderAutocast: under bf16 autocast the selective
// mode's default policy still recomputes c_fc's output (written in
// bfloat16 there) and KeepWide keeps it: the policy bounds the products
// in elements. Counted in bytes (before session 40; a reviewer helper
// found it), c_fc's half output (2 U of float32 bytes) passed the 3 U
// bound, so the default was SaveMatMuls under autocast, KeepWide did
// nothing, and WideRegions reported a float32 product's bytes.
func TestCheckpointSelectiveUnderAutocast(t *testing.T) {
	cfg := nn.GPTConfig{Vocab: 64, Context: 16, Layers: 4, Heads: 2, Width: 32}
	const B, T = 2, 16
	g, err := nn.NewGPT(cfg, nn.Options{Device: tensor.CPU(), DType: tensor.Float32, Rng: rand.New(rand.NewPCG(1, 2))})
	require.NoError(t, err)
	defer nn.Release(g.Parameters())
	for _, st := range []amp.State{{}, {Enabled: true, DType: tensor.BFloat16}, {Enabled: true, DType: tensor.Float16}} {
		g.Checkpoint = nn.Checkpointing{Mode: nn.CheckpointSelective}
		sel, _ := activationBytesAmp(t, g, B, T, st)
		n, per := g.WideRegions()
		g.Checkpoint = nn.Checkpointing{Mode: nn.CheckpointSelective, Policy: checkpoint.SaveMatMuls}
		all, _ := activationBytesAmp(t, g, B, T, st)
		g.Checkpoint = nn.Checkpointing{Mode: nn.CheckpointSelective, KeepWide: -1}
		wide, _ := activationBytesAmp(t, g, B, T, st)
		wideBytes := int64(4 * B * T * cfg.Width * 4) // c_fc's output: 4 U
		if st.Enabled {
			wideBytes /= 2
		}
		t.Logf("%v: selective held %d, SaveMatMuls %d, KeepWide all %d; WideRegions %d x %d", st, sel, all, wide, n, per)
		require.Equal(t, int64(cfg.Layers)*wideBytes, all-sel, "%v: the default recomputes each block's c_fc output", st)
		require.Equal(t, all, wide, "%v: KeepWide all keeps them", st)
		require.Equal(t, cfg.Layers, n, "%v", st)
		require.Equal(t, wideBytes, per, "%v: one wide product's bytes", st)
	}
}
