package nn_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/nn"
	"github.com/strata-ml/strata/tensor"
)

var genCfg = nn.GPTConfig{Vocab: 29, Context: 12, Layers: 2, Heads: 2, Width: 16}

// genGPT is a GPT whose weights are scaled up from GPT-2's
// initialisation, so that greedy decoding does not repeat one token.
func genGPT(t *testing.T, cfg nn.GPTConfig, seed uint64) *nn.GPT {
	g := layoutGPT(t, cfg, seed)
	for _, p := range g.Parameters() {
		if p.Value.Rank() == 2 {
			p.Value.ScaleInPlace(15)
		}
	}
	return g
}

// lastLogits is the full forward's logits of the last position of ids
// (the whole sequence recomputed).
func lastLogits(t *testing.T, g *nn.GPT, ids []int) []float32 {
	t.Helper()
	x := make([]int32, len(ids))
	for i, id := range ids {
		x[i] = int32(id)
	}
	all := gptLogits(t, g, x)
	V := g.Config.Vocab
	return all[len(all)-V:]
}

func argmax(xs []float32) int {
	best := 0
	for i, x := range xs {
		if x > xs[best] {
			best = i
		}
	}
	return best
}

// greedyByRecompute is greedy decoding by a full forward of the whole
// sequence, cropped to its last Context tokens as nanoGPT does, every
// step.
func greedyByRecompute(t *testing.T, g *nn.GPT, prompt []int, n int) []int {
	seq := slices.Clone(prompt)
	for range n {
		w := seq[max(0, len(seq)-g.Config.Context):]
		seq = append(seq, argmax(lastLogits(t, g, w)))
	}
	return seq[len(prompt):]
}

// maxDiff is the largest difference seen by requireClose.
var maxDiff float64

func requireClose(t *testing.T, want, got []float32, tol float64, msg string) {
	t.Helper()
	require.Len(t, got, len(want), msg)
	for i := range want {
		diff := math.Abs(float64(want[i]) - float64(got[i]))
		maxDiff = max(maxDiff, diff)
		require.LessOrEqual(t, diff, tol, "%s: logit %d: %v against %v", msg, i, got[i], want[i])
	}
}

// TestDecoderMatchesFullForward: the KV cache's logits, for a prompt fed
// at once or in pieces and then one token at a time up to the context,
// are the full recomputation's within 1e-5 (float32, CPU).
func TestDecoderMatchesFullForward(t *testing.T) {
	g := genGPT(t, genCfg, 7)
	c := tensor.NewCtx()
	d, err := g.NewDecoder(c)
	require.NoError(t, err)
	defer d.Release()
	for _, chunks := range [][]int{{4}, {1, 1, 1, 1}, {3, 1}, {genCfg.Context}} {
		d.Reset()
		seq := []int{}
		for i := range genCfg.Context {
			seq = append(seq, (7*i+3)%genCfg.Vocab)
		}
		fed := 0
		for _, n := range chunks {
			logits, err := d.Feed(seq[fed : fed+n])
			require.NoError(t, err)
			fed += n
			requireClose(t, lastLogits(t, g, seq[:fed]), logits, 1e-5, "prompt")
		}
		// Then greedy, one token at a time, to the end of the context.
		for fed < genCfg.Context {
			logits, err := d.Feed(seq[fed : fed+1])
			require.NoError(t, err)
			fed++
			requireClose(t, lastLogits(t, g, seq[:fed]), logits, 1e-5, "step")
		}
		require.Equal(t, genCfg.Context, d.Len())
		_, err = d.Feed([]int{1})
		require.ErrorIs(t, err, nn.ErrContextFull)
	}
	t.Logf("largest difference from the full forward: %.3g", maxDiff)
	require.Zero(t, c.BytesInUse(), "every intermediate freed")
	_, err = d.Feed(nil)
	require.ErrorContains(t, err, "no tokens")
	d.Reset()
	_, err = d.Feed([]int{genCfg.Vocab})
	require.ErrorContains(t, err, "outside the vocabulary")
	d.Release()
	_, err = d.Feed([]int{1})
	require.ErrorContains(t, err, "after Release")
}

// TestGenerateGreedyMatchesRecompute: greedy with the KV cache gives the
// tokens of recomputing the whole sequence every step, past the context
// (cropped) too; top-k 1 is greedy; the model's dropout is not applied.
func TestGenerateGreedyMatchesRecompute(t *testing.T) {
	g := genGPT(t, genCfg, 7)
	prompt := []int{5, 17, 2}
	n := 2*genCfg.Context + 3
	want := greedyByRecompute(t, g, prompt, n)
	t.Logf("greedy: %v", want)
	mem := settledInUse()
	got, err := g.Generate(nil, prompt, nn.GenerateOptions{MaxNewTokens: n})
	require.NoError(t, err)
	require.Equal(t, want, got)
	require.Equal(t, mem, tensor.CPU().Memory().InUse(), "the cache and every intermediate are freed")

	for _, seed := range []uint64{1, 2, 3} {
		got, err = g.Generate(tensor.NewCtx(), prompt, nn.GenerateOptions{MaxNewTokens: n, Temperature: 1.5, TopK: 1, Seed: seed})
		require.NoError(t, err)
		require.Equal(t, want, got, "top-k 1 is greedy")
	}

	// A model left in training mode with dropout: Generate is eval mode.
	cfg := genCfg
	cfg.Dropout = 0.5
	h := genGPT(t, cfg, 7)
	h.SetTraining(true)
	got, err = h.Generate(nil, prompt, nn.GenerateOptions{MaxNewTokens: n})
	require.NoError(t, err)
	require.Equal(t, want, got, "no dropout")

	// A prompt of the whole context.
	long := make([]int, genCfg.Context)
	for i := range long {
		long[i] = (3*i + 1) % genCfg.Vocab
	}
	got, err = g.Generate(nil, long, nn.GenerateOptions{MaxNewTokens: 4})
	require.NoError(t, err)
	require.Equal(t, greedyByRecompute(t, g, long, 4), got)
}

// TestGeneratePromptPastContext: a prompt longer than the context is
// cropped to its last Context tokens, as nanoGPT's generate crops the
// conditioning: the tokens of recomputing the cropped sequence, and of
// generating from the cropped prompt itself.
func TestGeneratePromptPastContext(t *testing.T) {
	g := genGPT(t, genCfg, 7)
	long := make([]int, genCfg.Context+5)
	for i := range long {
		long[i] = (5*i + 2) % genCfg.Vocab
	}
	got, err := g.Generate(nil, long, nn.GenerateOptions{MaxNewTokens: 6})
	require.NoError(t, err)
	require.Equal(t, greedyByRecompute(t, g, long, 6), got)
	cropped, err := g.Generate(nil, long[5:], nn.GenerateOptions{MaxNewTokens: 6})
	require.NoError(t, err)
	require.Equal(t, cropped, got)
	_, err = g.Generate(nil, append(long, genCfg.Vocab), nn.GenerateOptions{MaxNewTokens: 1})
	require.ErrorContains(t, err, "prompt token 29 (at 17) is outside the vocabulary")
}

func TestGenerateSampling(t *testing.T) {
	g := genGPT(t, genCfg, 7)
	prompt := []int{1, 2, 3}
	o := nn.GenerateOptions{MaxNewTokens: 20, Temperature: 1, TopP: 0.9, TopK: 20, Seed: 42}
	a, err := g.Generate(nil, prompt, o)
	require.NoError(t, err)
	b, err := g.Generate(nil, prompt, o)
	require.NoError(t, err)
	require.Equal(t, a, b, "same seed, same tokens")
	o.Seed = 43
	c, err := g.Generate(nil, prompt, o)
	require.NoError(t, err)
	require.NotEqual(t, a, c, "another seed, other tokens")
	// A near-flat random model sampled at a high temperature uses much
	// of the vocabulary.
	o = nn.GenerateOptions{MaxNewTokens: 200, Temperature: 5, Seed: 1}
	s, err := g.Generate(nil, prompt, o)
	require.NoError(t, err)
	seen := map[int]bool{}
	for _, tok := range s {
		seen[tok] = true
	}
	require.Greater(t, len(seen), genCfg.Vocab/2)
}

// TestGenerateVocab: Vocab restricts the tokens chosen to ids below it,
// greedy and sampled; the same seed without the restriction reaches the
// ids above it.
func TestGenerateVocab(t *testing.T) {
	g := genGPT(t, genCfg, 7)
	prompt := []int{1, 2, 3}
	const below = 10
	for _, o := range []nn.GenerateOptions{
		{MaxNewTokens: 200, Temperature: 5, Seed: 1},
		{MaxNewTokens: 30},
	} {
		all, err := g.Generate(nil, prompt, o)
		require.NoError(t, err)
		o.Vocab = below
		some, err := g.Generate(nil, prompt, o)
		require.NoError(t, err)
		require.Len(t, some, o.MaxNewTokens)
		for _, tok := range some {
			require.Less(t, tok, below)
		}
		if o.Temperature > 0 {
			require.Greater(t, slices.Max(all), below, "unrestricted, the sampling reaches higher ids")
		}
	}
	// Greedy under the restriction is the argmax of the first ids.
	got, err := g.Generate(nil, prompt, nn.GenerateOptions{MaxNewTokens: 1, Vocab: below})
	require.NoError(t, err)
	logits := lastLogits(t, g, prompt)
	require.Equal(t, argmax(logits[:below]), got[0])
}

func TestGenerateStopAndStream(t *testing.T) {
	g := genGPT(t, genCfg, 7)
	prompt := []int{4, 4, 8}
	all, err := g.Generate(nil, prompt, nn.GenerateOptions{MaxNewTokens: 10})
	require.NoError(t, err)
	require.Len(t, all, 10)
	stop := all[3]
	at := slices.Index(all, stop)
	got, err := g.Generate(nil, prompt, nn.GenerateOptions{MaxNewTokens: 10, StopTokens: []int{stop}})
	require.NoError(t, err)
	require.Equal(t, all[:at+1], got, "stops after the stop token, which is returned")

	var streamed []int
	got, err = g.Generate(nil, prompt, nn.GenerateOptions{MaxNewTokens: 10, OnToken: func(tok int) bool {
		streamed = append(streamed, tok)
		return len(streamed) < 6
	}})
	require.NoError(t, err)
	require.Equal(t, all[:6], got)
	require.Equal(t, got, streamed)

	got, err = g.Generate(nil, prompt, nn.GenerateOptions{})
	require.NoError(t, err)
	require.Empty(t, got)
}

func TestGenerateBadOptions(t *testing.T) {
	g := genGPT(t, genCfg, 7)
	ok := []int{1, 2}
	for _, tc := range []struct {
		prompt []int
		o      nn.GenerateOptions
		want   string
	}{
		{ok, nn.GenerateOptions{MaxNewTokens: -1}, "MaxNewTokens -1 is negative"},
		{ok, nn.GenerateOptions{MaxNewTokens: 1, Temperature: -1}, "Temperature -1"},
		{ok, nn.GenerateOptions{MaxNewTokens: 1, Temperature: math.NaN()}, "Temperature NaN"},
		{ok, nn.GenerateOptions{MaxNewTokens: 1, Temperature: math.Inf(1)}, "Temperature +Inf"},
		{ok, nn.GenerateOptions{MaxNewTokens: 1, TopK: -3}, "TopK -3 is negative"},
		{ok, nn.GenerateOptions{MaxNewTokens: 1, TopP: 1.5}, "TopP 1.5: want a probability in (0, 1]"},
		{ok, nn.GenerateOptions{MaxNewTokens: 1, TopP: -0.1}, "TopP -0.1"},
		{ok, nn.GenerateOptions{MaxNewTokens: 1, TopP: math.NaN()}, "TopP NaN"},
		{ok, nn.GenerateOptions{MaxNewTokens: 1, StopTokens: []int{29}}, "stop token 29 is outside the vocabulary [0, 29)"},
		{ok, nn.GenerateOptions{MaxNewTokens: 1, Vocab: 30}, "Vocab 30: want 1 to the model's vocabulary of 29"},
		{ok, nn.GenerateOptions{MaxNewTokens: 1, Vocab: -1}, "Vocab -1"},
		{ok, nn.GenerateOptions{MaxNewTokens: 1, Vocab: 10, StopTokens: []int{10}}, "stop token 10 is outside the vocabulary [0, 10)"},
		{nil, nn.GenerateOptions{MaxNewTokens: 1}, "empty prompt"},
		{[]int{1, -1}, nn.GenerateOptions{MaxNewTokens: 1}, "prompt token -1 (at 1) is outside the vocabulary [0, 29)"},
		{[]int{29}, nn.GenerateOptions{MaxNewTokens: 1}, "prompt token 29 (at 0) is outside"},
	} {
		_, err := g.Generate(nil, tc.prompt, tc.o)
		require.ErrorContains(t, err, tc.want)
	}
	require.True(t, errors.Is(nn.ErrContextFull, nn.ErrContextFull))
}

// BenchmarkGenerateTiny: greedy generation with the KV cache on the tiny
// shape (2 layers, width 128, context 64), 56 tokens after an 8-token
// prompt per op.
func BenchmarkGenerateTiny(b *testing.B) {
	cfg := nn.GPTConfigs["tiny"]
	g, err := nn.NewGPT(cfg, nn.Options{Device: tensor.CPU(), DType: tensor.Float32, Rng: rand.New(rand.NewPCG(1, 3))})
	require.NoError(b, err)
	defer nn.Release(g.Parameters())
	prompt := []int{'1', '2', '3', '+', '4', '5', '6', '='}
	o := nn.GenerateOptions{MaxNewTokens: cfg.Context - len(prompt)}
	b.ResetTimer()
	for range b.N {
		if _, err := g.Generate(nil, prompt, o); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*o.MaxNewTokens)/b.Elapsed().Seconds(), "tokens/s")
}

// TestGenerateConcurrent: goroutines, each with its own Ctx, generate
// from one shared model at once and get the serial tokens (clean under
// go test -race).
func TestGenerateConcurrent(t *testing.T) {
	g := genGPT(t, genCfg, 7)
	o := nn.GenerateOptions{MaxNewTokens: 20, Temperature: 0.9, TopK: 10, Seed: 3}
	want, err := g.Generate(nil, []int{1, 2, 3}, o)
	require.NoError(t, err)
	got := make([][]int, 4)
	errs := make([]error, 4)
	done := make(chan int)
	for i := range got {
		go func() {
			got[i], errs[i] = g.Generate(tensor.NewCtx(), []int{1, 2, 3}, o)
			done <- i
		}()
	}
	for range got {
		<-done
	}
	for i := range got {
		require.NoError(t, errs[i])
		require.Equal(t, want, got[i])
	}
}

// TestGenerateHugeBoundWithStop: "until a stop token" asked with a huge
// MaxNewTokens allocated the whole bound up front (a fatal out of memory,
// or a makeslice panic for math.MaxInt); the output now grows as tokens
// come.
func TestGenerateHugeBoundWithStop(t *testing.T) {
	g := genGPT(t, genCfg, 7)
	every := make([]int, genCfg.Vocab)
	for i := range every {
		every[i] = i
	}
	for _, n := range []int{1 << 40, math.MaxInt} {
		got, err := g.Generate(nil, []int{1}, nn.GenerateOptions{MaxNewTokens: n, StopTokens: every})
		require.NoError(t, err)
		require.Len(t, got, 1, "the first token is a stop token")
		calls := 0
		got, err = g.Generate(nil, []int{1}, nn.GenerateOptions{MaxNewTokens: n, OnToken: func(int) bool { calls++; return calls < 5 }})
		require.NoError(t, err)
		require.Len(t, got, 5)
	}
}
