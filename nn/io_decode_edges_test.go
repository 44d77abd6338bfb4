package nn_test

import (
	"context"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/memory/memtest"
	"github.com/strata-ml/strata/nn"
	"github.com/strata-ml/strata/tensor"
)

// TestDecoderChunksOntoCache: several tokens fed at once onto a non-empty
// cache give the full forward's logits.
func TestDecoderChunksOntoCache(t *testing.T) {
	g := genGPT(t, genCfg, 7)
	d, err := g.NewDecoder(nil)
	require.NoError(t, err)
	defer d.Release()
	seq := []int{}
	for i := range genCfg.Context {
		seq = append(seq, (5*i+2)%genCfg.Vocab)
	}
	for _, chunks := range [][]int{{2, 3, 4, 3}, {1, 5, 6}, {5, 7}} {
		d.Reset()
		fed := 0
		for _, n := range chunks {
			logits, err := d.Feed(seq[fed : fed+n])
			require.NoError(t, err)
			fed += n
			requireClose(t, lastLogits(t, g, seq[:fed]), logits, 1e-5, "chunk")
		}
	}
}

// TestTwoDecodersOfOneModel: two Decoders of one model, fed in turns, each
// give their own sequence's logits.
func TestTwoDecodersOfOneModel(t *testing.T) {
	g := genGPT(t, genCfg, 7)
	c := tensor.NewCtx()
	a, err := g.NewDecoder(c)
	require.NoError(t, err)
	defer a.Release()
	b, err := g.NewDecoder(c)
	require.NoError(t, err)
	defer b.Release()
	sa := []int{1, 2, 3, 4, 5, 6, 7}
	sb := []int{9, 8, 7, 6, 5, 4, 3}
	for i := range sa {
		la, err := a.Feed(sa[i : i+1])
		require.NoError(t, err)
		lb, err := b.Feed(sb[i : i+1])
		require.NoError(t, err)
		requireClose(t, lastLogits(t, g, sa[:i+1]), la, 1e-5, "a")
		requireClose(t, lastLogits(t, g, sb[:i+1]), lb, 1e-5, "b")
	}
}

// TestGenerateCropsRepeatedly: a prompt of the whole context, or of one
// token, generated three contexts past it: the recomputation's tokens.
func TestGenerateCropsRepeatedly(t *testing.T) {
	g := genGPT(t, genCfg, 7)
	long := make([]int, genCfg.Context)
	for i := range long {
		long[i] = (3*i + 1) % genCfg.Vocab
	}
	n := 3*genCfg.Context + 1
	got, err := g.Generate(nil, long, nn.GenerateOptions{MaxNewTokens: n})
	require.NoError(t, err)
	require.Equal(t, greedyByRecompute(t, g, long, n), got)
	one := []int{4}
	got, err = g.Generate(nil, one, nn.GenerateOptions{MaxNewTokens: n})
	require.NoError(t, err)
	require.Equal(t, greedyByRecompute(t, g, one, n), got)
}

// TestWeightsRoundTripBF16Model: a bf16 model saved in either layout,
// loaded, saved again and loaded into a float32 model: the same logits.
func TestWeightsRoundTripBF16Model(t *testing.T) {
	dir := t.TempDir()
	a := layoutGPT(t, layoutCfg, 1)
	roundTo(a, tensor.BFloat16)
	want := gptLogits(t, a, layoutIDs)
	for _, l := range []nn.Layout{nn.LayoutNanoGPT, nn.LayoutHF} {
		path := filepath.Join(dir, l.String()+".safetensors")
		require.NoError(t, nn.SaveWeightsLayout(context.Background(), path, a.Parameters(), nil, l))
		b := bf16Params(t, layoutCfg) // NewGPT refuses bf16 parameters: a GPT's own, in bf16
		_, got, err := nn.LoadWeightsLayout(path, b, nn.LayoutAuto)
		require.NoError(t, err)
		require.Equal(t, l, got)
		hf := filepath.Join(dir, "b"+l.String()+".safetensors")
		require.NoError(t, nn.SaveWeightsLayout(context.Background(), hf, b, nil, l))
		nn.Release(b)
		c := layoutGPT(t, layoutCfg, 5)
		_, got, err = nn.LoadWeightsLayout(hf, c.Parameters(), nn.LayoutAuto)
		require.NoError(t, err)
		require.Equal(t, l, got)
		require.Equal(t, want, gptLogits(t, c, layoutIDs))
	}
}

// bf16Params are the parameters of a GPT of cfg (names, shapes, Decay)
// held in bfloat16: a container for a bf16 model's weights, which NewGPT
// refuses to build (a GPT cannot run with half-precision parameters).
func bf16Params(t *testing.T, cfg nn.GPTConfig) []*nn.Parameter {
	t.Helper()
	g, err := nn.NewGPT(cfg, nn.Options{Device: tensor.CPU()})
	require.NoError(t, err)
	defer nn.Release(g.Parameters())
	var ps []*nn.Parameter
	for _, p := range g.Parameters() {
		v, err := tensor.NewKept(tensor.CPU(), tensor.BFloat16, memory.RoleParameter, p.Value.Shape()...)
		require.NoError(t, err)
		v.CopyFrom(p.Value)
		ps = append(ps, &nn.Parameter{Var: autograd.Param(v, p.Name), Name: p.Name, Decay: p.Decay})
	}
	return ps
}

// oomGPT is a GPT of layoutCfg on a device of its own, whose bytes no
// other test moves.
func oomGPT(t *testing.T) (*nn.GPT, *memory.Manager) {
	t.Helper()
	m := memory.NewHostManager(memory.Config{})
	g, err := nn.NewGPT(layoutCfg, nn.Options{Device: tensor.NewCPUDevice(m), DType: tensor.Float32, Rng: rand.New(rand.NewPCG(1, 0))})
	require.NoError(t, err)
	return g, m
}

// TestSaveWeightsLayoutHFOutOfMemoryLeaksNothing: SaveWeightsLayout in
// layout hf, running out of memory while it transposes a projection,
// returns the error and leaves no tensor unreleased (the transposed view
// kept the parameter's storage until the garbage collector's safety net).
func TestSaveWeightsLayoutHFOutOfMemoryLeaksNothing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hf.safetensors")
	for k := int64(1); ; k++ {
		g, m := oomGPT(t)
		leaked := tensor.LeakedTensors()
		m.FailAllocation(k)
		err := nn.SaveWeightsLayout(context.Background(), path, g.Parameters(), nil, nn.LayoutHF)
		injected := m.FailAllocation(0)
		nn.Release(g.Parameters())
		require.Zero(t, m.InUse(), "allocation %d: the parameters' memory is back after Release", k)
		memtest.Settled(m)
		require.Equal(t, leaked, tensor.LeakedTensors(), "allocation %d: no tensor collected unreleased", k)
		if injected == 0 {
			require.NoError(t, err)
			break
		}
		require.ErrorIs(t, err, memory.ErrInjected, "allocation %d", k)
	}
}

// TestLoadWeightsOutOfMemoryChangesNothing: LoadWeights running out of
// memory while reading the file onto the device returns the error and
// changes no parameter (a refused file changes no parameter), in both
// layouts.
func TestLoadWeightsOutOfMemoryChangesNothing(t *testing.T) {
	dir := t.TempDir()
	src := layoutGPT(t, layoutCfg, 9)
	for _, l := range []nn.Layout{nn.LayoutNanoGPT, nn.LayoutHF} {
		path := filepath.Join(dir, l.String()+".safetensors")
		require.NoError(t, nn.SaveWeightsLayout(context.Background(), path, src.Parameters(), nil, l))
		g, m := oomGPT(t)
		ps := g.Parameters()
		var before [][]float32
		for _, p := range ps {
			before = append(before, p.Value.Float32s())
		}
		base := m.InUse()
		for k := int64(1); ; k++ {
			m.FailAllocation(k)
			_, err := nn.LoadWeights(path, ps)
			injected := m.FailAllocation(0)
			require.Equal(t, base, m.InUse(), "%v, allocation %d: nothing left", l, k)
			if injected == 0 {
				require.NoError(t, err)
				break
			}
			require.ErrorIs(t, err, memory.ErrInjected, "%v, allocation %d", l, k)
			for i, p := range ps {
				require.True(t, slices.Equal(before[i], p.Value.Float32s()), "%v, allocation %d: %s changed", l, k, p.Name)
			}
		}
		for i, p := range ps {
			require.True(t, slices.Equal(src.Parameters()[i].Value.Float32s(), p.Value.Float32s()), "%v: loaded at last: %s", l, p.Name)
		}
		nn.Release(ps)
	}
}
