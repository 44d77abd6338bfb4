package nn_test

import (
	"bytes"
	"context"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/amp"
	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/nn"
	"github.com/strata-ml/strata/tensor"
)

// concurrentCfg is a tiny GPT with dropout on, so the contexts' random
// streams matter.
var concurrentCfg = nn.GPTConfig{Vocab: 13, Context: 8, Layers: 2, Heads: 2, Width: 16, Dropout: 0.1}

// concurrentJob is one training a goroutine runs: its checkpointing and
// whether its forward runs under bfloat16 autocast.
type concurrentJob struct {
	name     string
	ckpt     nn.Checkpointing
	autocast bool
}

var concurrentJobs = []concurrentJob{
	{name: "plain"},
	{name: "autocast bf16", autocast: true},
	{name: "checkpoint blocks", ckpt: nn.Checkpointing{Mode: nn.CheckpointBlocks}},
	{name: "checkpoint selective offloaded", ckpt: nn.Checkpointing{Mode: nn.CheckpointSelective, Offload: true}},
	{name: "checkpoint blocks + autocast", ckpt: nn.Checkpointing{Mode: nn.CheckpointBlocks}, autocast: true},
}

func newConcurrentGPT(t *testing.T, seed uint64) *nn.GPT {
	g, err := nn.NewGPT(concurrentCfg, nn.Options{Device: tensor.CPU(), DType: tensor.Float32, Rng: rand.New(rand.NewPCG(seed, 5))})
	require.NoError(t, err)
	return g
}

// runConcurrentJob trains a fresh model as job says for n steps in its own
// context and returns the bits of every loss and of every parameter
// after the last step; it releases the model.
func runConcurrentJob(t *testing.T, job concurrentJob, n int) (losses []uint32, params []uint32) {
	g := newConcurrentGPT(t, 11)
	defer nn.Release(g.Parameters())
	g.Checkpoint = job.ckpt
	c := tensor.NewCtx()
	ps := g.Parameters()
	opt := nn.NewAdamW(ps, 3e-3, 0.1)
	defer opt.Release()
	rng := rand.New(rand.NewPCG(9, 9))
	B, T, V := 2, concurrentCfg.Context, concurrentCfg.Vocab
	xs, ys := make([]int32, B*T), make([]int32, B*T)
	for i := range n {
		for j := range xs {
			xs[j], ys[j] = int32(rng.IntN(V)), int32(rng.IntN(V))
		}
		err := tensor.Try(func() {
			c.WithScope(func() {
				x, y := c.FromInt32s(tensor.CPU(), xs, B, T), c.FromInt32s(tensor.CPU(), ys, B, T)
				var loss *autograd.Var
				if job.autocast {
					amp.Autocast(c, tensor.BFloat16, func() { loss = g.Loss(x, y) })
				} else {
					loss = g.Loss(x, y)
				}
				if st := amp.Current(c); st.Enabled {
					panic("autocast state left on after the region")
				}
				if err := loss.Backward(); err != nil {
					panic(err)
				}
				losses = append(losses, math.Float32bits(loss.Value.Float32s()[0]))
				if _, err := nn.ClipGradNorm(ps, 1); err != nil {
					panic(err)
				}
				if err := opt.Step(); err != nil {
					panic(err)
				}
				nn.ZeroGrad(ps)
			})
		})
		if !assert.NoError(t, err, "%s: step %d", job.name, i) {
			return
		}
	}
	assert.Zero(t, c.BytesInUse(), "%s: context bytes after training", job.name)
	for _, p := range ps {
		for _, v := range p.Value.Float32s() {
			params = append(params, math.Float32bits(v))
		}
	}
	return losses, params
}

// inferBits runs g's forward without gradients in context c, under
// bfloat16 autocast when ac, and returns the logits' bits.
func inferBits(c *tensor.Ctx, g *nn.GPT, ids []int32, ac bool) (out []uint32) {
	c.WithScope(func() {
		autograd.NoGradIn(c, func() {
			x := c.FromInt32s(tensor.CPU(), ids, 1, len(ids))
			var v []float32
			if ac {
				amp.Autocast(c, tensor.BFloat16, func() { v = g.Forward(x).Value.Float32s() })
			} else {
				v = g.Forward(x).Value.Float32s()
			}
			for _, f := range v {
				out = append(out, math.Float32bits(f))
			}
		})
	})
	return out
}

// TestConcurrentMixedWorkloadsMatchSequential runs, at the same
// time and each in its own Ctx on the shared CPU device: trainings of
// five fresh models (plain, bfloat16 autocast, checkpointed blocks,
// selective offloaded checkpointing, checkpoint + autocast), two
// inferences of one shared read-only model (one under autocast, one not:
// the region must not leak into the other's products or its weight
// cache), two saves of two other models to different files, and a
// goroutine that reads the memory manager's statistics and snapshots
// throughout. Every result must equal, bit for bit, the same work done
// one at a time, and the bytes in use return to the baseline.
func TestConcurrentMixedWorkloadsMatchSequential(t *testing.T) {
	const steps, infers = 3, 6
	mem := tensor.CPU().Memory()
	base := settledInUse()

	// Sequential references.
	type res struct{ losses, params []uint32 }
	want := make([]res, len(concurrentJobs))
	for i, j := range concurrentJobs {
		want[i].losses, want[i].params = runConcurrentJob(t, j, steps)
		require.Len(t, want[i].losses, steps, j.name)
	}
	shared := newConcurrentGPT(t, 21)
	defer nn.Release(shared.Parameters())
	shared.SetTraining(false)
	ids := []int32{3, 1, 4, 1, 5, 9, 2, 6}
	wantPlain := inferBits(tensor.NewCtx(), shared, ids, false)
	wantAC := inferBits(tensor.NewCtx(), shared, ids, true)
	require.NotEqual(t, wantPlain, wantAC, "autocast changes the logits")

	savers := []*nn.GPT{newConcurrentGPT(t, 31), newConcurrentGPT(t, 32)}
	defer func() {
		for _, g := range savers {
			nn.Release(g.Parameters())
		}
	}()
	dir := t.TempDir()
	wantFiles := make([][]byte, len(savers))
	for i, g := range savers {
		p := filepath.Join(dir, "seq"+string(rune('a'+i))+".safetensors")
		require.NoError(t, g.SaveWeights(context.Background(), p, nil, nn.LayoutNanoGPT))
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		wantFiles[i] = b
	}

	// The same work, concurrently.
	got := make([]res, len(concurrentJobs))
	var wg sync.WaitGroup
	var done atomic.Bool
	for i, j := range concurrentJobs {
		wg.Go(func() { got[i].losses, got[i].params = runConcurrentJob(t, j, steps) })
	}
	for _, ac := range []bool{false, true} {
		wg.Go(func() {
			c := tensor.NewCtx()
			w := wantPlain
			if ac {
				w = wantAC
			}
			for k := range infers {
				var out []uint32
				err := tensor.Try(func() { out = inferBits(c, shared, ids, ac) })
				if !assert.NoError(t, err) || !assert.Equal(t, w, out, "inference %d (autocast %v)", k, ac) {
					return
				}
				assert.False(t, amp.Current(c).Enabled)
			}
			assert.Zero(t, c.BytesInUse())
		})
	}
	gotFiles := make([][]byte, len(savers))
	for i, g := range savers {
		wg.Go(func() {
			p := filepath.Join(dir, "par"+string(rune('a'+i))+".safetensors")
			if assert.NoError(t, g.SaveWeights(context.Background(), p, nil, nn.LayoutNanoGPT)) {
				b, err := os.ReadFile(p)
				assert.NoError(t, err)
				gotFiles[i] = b
			}
		})
	}
	var readerWG sync.WaitGroup
	mem.RecordHistory(1 << 12)
	defer mem.StopHistory()
	readerWG.Go(func() {
		for !done.Load() {
			_ = mem.Stats()
			_ = mem.InUse()
			_ = mem.Snapshot()
			_ = mem.Summary()
			_ = mem.Pool(0).Segments()
			mem.ResetPeaks()
			_ = mem.EmptyCache()
			mem.MarkHistory("concurrent")
			if h := mem.History(); h != nil {
				_ = h
			}
		}
	})
	wg.Wait()
	done.Store(true)
	readerWG.Wait()

	for i, j := range concurrentJobs {
		assert.Equal(t, want[i].losses, got[i].losses, "%s: losses, concurrent vs sequential", j.name)
		assert.True(t, slicesEqual(want[i].params, got[i].params), "%s: parameters after training, concurrent vs sequential", j.name)
	}
	for i := range savers {
		assert.True(t, bytes.Equal(wantFiles[i], gotFiles[i]), "saved file %d, concurrent vs sequential", i)
	}
	// Loading a concurrently saved file into a fresh model gives the saver's values.
	g := newConcurrentGPT(t, 99)
	_, err := nn.LoadWeights(filepath.Join(dir, "para.safetensors"), g.Parameters())
	require.NoError(t, err)
	for k, p := range g.Parameters() {
		assert.Equal(t, savers[0].Parameters()[k].Value.Float32s(), p.Value.Float32s(), p.Name)
	}
	nn.Release(g.Parameters())
	nn.Release(shared.Parameters())
	for _, s := range savers {
		nn.Release(s.Parameters())
	}
	assert.Equal(t, base, settledInUse(), "bytes in use back at the baseline")
	_ = mem
}

func slicesEqual(a, b []uint32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestConcurrentReleaseAcrossContexts: goroutines make tensors in
// their own contexts, keep some and hand them to another goroutine that
// releases them while the makers go on opening and closing scopes; every
// context's bytes and the device's bytes in use come back.
func TestConcurrentReleaseAcrossContexts(t *testing.T) {
	const workers, rounds = 4, 200
	base := settledInUse()
	ch := make(chan *tensor.Tensor, 64)
	var makers, releasers sync.WaitGroup
	ctxs := make([]*tensor.Ctx, workers)
	for w := range workers {
		ctxs[w] = tensor.NewCtx()
		c := ctxs[w]
		makers.Go(func() {
			for r := range rounds {
				err := tensor.Try(func() {
					c.WithScope(func() {
						a := c.Ones(tensor.CPU(), tensor.Float32, 4, 8)
						b := tensor.Add(a, a)
						s := tensor.Sum(b, false)
						if r%2 == 0 {
							k := tensor.Mul(b, b)
							tensor.Keep(k)
							ch <- k
						}
						a.Release() // early release of a tracked tensor
						_ = s.Item()
					})
				})
				if !assert.NoError(t, err) {
					return
				}
			}
		})
	}
	for range 2 {
		releasers.Go(func() {
			for k := range ch {
				k.Release()
			}
		})
	}
	makers.Wait()
	close(ch)
	releasers.Wait()
	for _, c := range ctxs {
		assert.Zero(t, c.BytesInUse(), "a maker context's bytes after its kept tensors were released elsewhere")
	}
	assert.Equal(t, base, settledInUse())
}

// sharedGradBits computes, in a context of its own, the gradients of g's
// loss on a fixed batch with autograd.Grad (which writes no parameter's
// Grad, so g may be shared), and returns the loss's and gradients' bits.
func sharedGradBits(t *testing.T, g *nn.GPT, seed uint64, ac bool) (out []uint32) {
	c := tensor.NewCtx()
	ps := g.Parameters()
	vs := make([]*autograd.Var, len(ps))
	for i, p := range ps {
		vs[i] = p.Var
	}
	rng := rand.New(rand.NewPCG(seed, seed))
	B, T, V := 2, concurrentCfg.Context, concurrentCfg.Vocab
	xs, ys := make([]int32, B*T), make([]int32, B*T)
	for j := range xs {
		xs[j], ys[j] = int32(rng.IntN(V)), int32(rng.IntN(V))
	}
	err := tensor.Try(func() {
		c.WithScope(func() {
			x, y := c.FromInt32s(tensor.CPU(), xs, B, T), c.FromInt32s(tensor.CPU(), ys, B, T)
			var loss *autograd.Var
			if ac {
				amp.Autocast(c, tensor.BFloat16, func() { loss = g.Loss(x, y) })
			} else {
				loss = g.Loss(x, y)
			}
			gs, err := autograd.Grad(loss, vs, autograd.GradOptions{})
			if err != nil {
				panic(err)
			}
			out = append(out, math.Float32bits(loss.Value.Float32s()[0]))
			for _, gr := range gs {
				for _, v := range gr.Float32s() {
					out = append(out, math.Float32bits(v))
				}
			}
		})
	})
	require.NoError(t, err)
	assert.Zero(t, c.BytesInUse())
	return out
}

// TestConcurrentSharedModelGradAndGenerate: goroutines take
// gradients of one shared checkpointed (selective, offloaded) GPT with
// autograd.Grad, with and without autocast, and generate from it, at the
// same time; each result equals the same work done alone.
func TestConcurrentSharedModelGradAndGenerate(t *testing.T) {
	base := settledInUse()
	for _, ck := range []nn.Checkpointing{{}, {Mode: nn.CheckpointBlocks}, {Mode: nn.CheckpointSelective, Offload: true}} {
		g := newConcurrentGPT(t, 41)
		g.Checkpoint = ck
		gen := nn.GenerateOptions{MaxNewTokens: 6, Temperature: 0.8, TopK: 5, Seed: 3}
		var want [4][]uint32
		for i := range 4 {
			want[i] = sharedGradBits(t, g, uint64(i+1), i%2 == 1)
		}
		wantGen, err := g.Generate(tensor.NewCtx(), []int{1, 2, 3}, gen)
		require.NoError(t, err)
		var got [4][]uint32
		var gotGen [2][]int
		var wg sync.WaitGroup
		for i := range 4 {
			wg.Go(func() { got[i] = sharedGradBits(t, g, uint64(i+1), i%2 == 1) })
		}
		for i := range 2 {
			wg.Go(func() {
				var err error
				gotGen[i], err = g.Generate(tensor.NewCtx(), []int{1, 2, 3}, gen)
				assert.NoError(t, err)
			})
		}
		wg.Wait()
		for i := range 4 {
			assert.True(t, slicesEqual(want[i], got[i]), "%v: gradients of batch %d, concurrent vs sequential", ck, i)
		}
		for i := range 2 {
			assert.Equal(t, wantGen, gotGen[i], "%v: generation %d", ck, i)
		}
		nn.Release(g.Parameters())
	}
	assert.Equal(t, base, settledInUse())
}

// trainMLPBits trains a fresh MLP large enough for the CPU kernels to
// split their work over goroutines (256-512-256, batch 64) for n steps in
// its own context, under bfloat16 autocast when ac, and returns the
// losses' bits and the parameters' bits at the end.
func trainMLPBits(t *testing.T, n int, ac bool, sgd bool) (out []uint32) {
	m, err := nn.NewFeedForward(nn.Options{Device: tensor.CPU(), DType: tensor.Float32, Rng: rand.New(rand.NewPCG(5, 6))}, "mlp", autograd.Gelu, 256, 512, 256)
	require.NoError(t, err)
	ps := m.Parameters()
	defer nn.Release(ps)
	var opt nn.Optimizer
	if sgd {
		s := nn.NewSGD(ps, 1e-2, 0.9)
		defer s.Release()
		opt = s
	} else {
		a := nn.NewAdamW(ps, 1e-3, 0.01)
		defer a.Release()
		opt = a
	}
	c := tensor.NewCtx()
	rng := rand.New(rand.NewPCG(8, 8))
	for i := range n {
		l, err := nn.TrainStep(c, ps, opt, func() *autograd.Var {
			x := autograd.Const(c.RandN(tensor.CPU(), tensor.Float32, rng, 1, 64, 256))
			y := autograd.Const(c.RandN(tensor.CPU(), tensor.Float32, rng, 1, 64, 256))
			var loss *autograd.Var
			if ac {
				amp.Autocast(c, tensor.BFloat16, func() { loss = nn.MSELoss(m.Forward(x), y, nn.ReduceMean) })
			} else {
				loss = nn.MSELoss(m.Forward(x), y, nn.ReduceMean)
			}
			return loss
		})
		if !assert.NoError(t, err, "step %d", i) {
			return nil
		}
		out = append(out, math.Float32bits(float32(l)))
	}
	nn.ZeroGrad(ps) // TrainStep leaves the last gradients, counted in c
	assert.Zero(t, c.BytesInUse())
	for _, p := range ps {
		for _, v := range p.Value.Float32s() {
			out = append(out, math.Float32bits(v))
		}
	}
	return out
}

// TestConcurrentLargeMLPsMatchSequential: four MLPs whose kernels
// run in parallel train at once (AdamW and SGD, with and without
// autocast), each bit for bit as when trained alone.
func TestConcurrentLargeMLPsMatchSequential(t *testing.T) {
	const n = 3
	base := settledInUse()
	type job struct{ ac, sgd bool }
	jobs := []job{{false, false}, {true, false}, {false, true}, {true, true}}
	want := make([][]uint32, len(jobs))
	for i, j := range jobs {
		want[i] = trainMLPBits(t, n, j.ac, j.sgd)
	}
	got := make([][]uint32, len(jobs))
	var wg sync.WaitGroup
	for i, j := range jobs {
		wg.Go(func() { got[i] = trainMLPBits(t, n, j.ac, j.sgd) })
	}
	wg.Wait()
	for i, j := range jobs {
		assert.True(t, len(want[i]) > n && slicesEqual(want[i], got[i]), "%+v: losses and parameters, concurrent vs sequential", j)
	}
	assert.Equal(t, base, settledInUse())
}

// TestConcurrentHooksAndAnomalyStayInTheirContext: one goroutine
// trains with gradient hooks on its parameters and anomaly detection on,
// two others train plain models at the same time; the hooks fire once per
// parameter per step in their own goroutine's passes only, and every
// training matches its sequential run bit for bit.
func TestConcurrentHooksAndAnomalyStayInTheirContext(t *testing.T) {
	base := settledInUse()
	run := func(hooked bool) (out []uint32, fired int) {
		g := newConcurrentGPT(t, 51)
		defer nn.Release(g.Parameters())
		ps := g.Parameters()
		if hooked {
			for _, p := range ps {
				p.Var.SetGradHook(func(*autograd.Var) { fired++ })
				defer p.Var.SetGradHook(nil)
			}
		}
		opt := nn.NewAdamW(ps, 3e-3, 0.1)
		defer opt.Release()
		c := tensor.NewCtx()
		ids := []int32{1, 2, 3, 4, 5, 6, 7, 8, 8, 7, 6, 5, 4, 3, 2, 1}
		for range 3 {
			l, err := nn.TrainStep(c, ps, opt, func() *autograd.Var {
				x := c.FromInt32s(tensor.CPU(), ids, 2, 8)
				var loss *autograd.Var
				body := func() { loss = g.Loss(x, c.FromInt32s(tensor.CPU(), ids, 2, 8)) }
				if hooked {
					autograd.DetectAnomalyIn(c, body)
				} else {
					body()
				}
				return loss
			})
			if !assert.NoError(t, err) {
				return nil, fired
			}
			out = append(out, math.Float32bits(float32(l)))
		}
		nn.ZeroGrad(ps)
		assert.Zero(t, c.BytesInUse())
		for _, p := range ps {
			for _, v := range p.Value.Float32s() {
				out = append(out, math.Float32bits(v))
			}
		}
		return out, fired
	}
	wantHooked, wantFired := run(true)
	wantPlain, zero := run(false)
	require.Zero(t, zero)
	require.Positive(t, wantFired)
	var gotHooked, gotPlain1, gotPlain2 []uint32
	var gotFired, f1, f2 int
	var wg sync.WaitGroup
	wg.Go(func() { gotHooked, gotFired = run(true) })
	wg.Go(func() { gotPlain1, f1 = run(false) })
	wg.Go(func() { gotPlain2, f2 = run(false) })
	wg.Wait()
	assert.Equal(t, wantFired, gotFired)
	assert.Zero(t, f1+f2)
	assert.True(t, slicesEqual(wantHooked, gotHooked), "hooked training, concurrent vs sequential")
	assert.True(t, slicesEqual(wantPlain, gotPlain1) && slicesEqual(wantPlain, gotPlain2), "plain trainings, concurrent vs sequential")
	assert.True(t, slicesEqual(wantPlain, wantHooked), "hooks and anomaly detection change no value")
	assert.Equal(t, base, settledInUse())
}

// TestConcurrentOwnCtxWhileBackgroundHandedOff: a goroutine that works in
// its own Ctx (inference and gradients of a GPT, with and without
// autocast) is not refused while another goroutine has been handed
// Background (a scope of it opened by a goroutine other than its
// parent's, as a subtest does). The GPT's ops on parameters alone (the
// positions' Narrow of Wpe, autocast's weight casts) fall back to
// Background; they used to fail with the misuse error meant for two
// goroutines sharing one Ctx ("give each goroutine its own Ctx").
func TestConcurrentOwnCtxWhileBackgroundHandedOff(t *testing.T) {
	g := newConcurrentGPT(t, 41)
	defer nn.Release(g.Parameters())
	ids := []int32{1, 2, 3, 4}
	var want [2][]uint32
	for i, ac := range []bool{false, true} {
		want[i] = inferBits(tensor.NewCtx(), g, ids, ac)
	}
	tensor.WithScope(func() {
		opened, done, fin := make(chan struct{}), make(chan struct{}), make(chan error)
		go func() { // handed Background, and working in it until done
			fin <- tensor.Try(func() {
				tensor.WithScope(func() {
					close(opened)
					<-done
					tensor.Ones(tensor.CPU(), tensor.Float32, 2).Float32s()
				})
			})
		}()
		<-opened
		for i, ac := range []bool{false, true} {
			var got []uint32
			err := tensor.Try(func() { got = inferBits(tensor.NewCtx(), g, ids, ac) })
			if assert.NoError(t, err, "inference in its own Ctx, autocast %v", ac) {
				assert.Equal(t, want[i], got, "autocast %v", ac)
			}
			err = tensor.Try(func() { sharedGradBits(t, g, 1, ac) })
			assert.NoError(t, err, "gradients in its own Ctx, autocast %v", ac)
		}
		close(done)
		assert.NoError(t, <-fin)
	})
	assert.Zero(t, tensor.Background().BytesInUse())
}

// TestConcurrentOwnCtxBesideBackgroundUser: one goroutine does its
// tensor work in Background (as the package-level functions do, the one
// goroutine that uses it) while another runs a GPT's inference in its
// own Ctx. The model's ops on parameters alone (each Linear's weight
// transpose, the positions' slice of Wpe, autocast's casts) run in
// Background; their results used to go to the other goroutine's
// innermost scope, which released them while in use: spurious "released
// when the scope that owned it closed" errors, a data race under -race,
// and at times a kernel panic outside tensor.Try on the freed bias.
func TestConcurrentOwnCtxBesideBackgroundUser(t *testing.T) {
	g := newConcurrentGPT(t, 41)
	defer nn.Release(g.Parameters())
	g.SetTraining(false)
	ids := []int32{1, 2, 3, 4}
	var want [2][]uint32
	for i, ac := range []bool{false, true} {
		want[i] = inferBits(tensor.NewCtx(), g, ids, ac)
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Go(func() {
		for !stop.Load() {
			tensor.WithScope(func() { tensor.Ones(tensor.CPU(), tensor.Float32, 2).Float32s() })
		}
	})
	defer func() { stop.Store(true); wg.Wait() }()
	for i := range 150 {
		var got []uint32
		err := tensor.Try(func() { got = inferBits(tensor.NewCtx(), g, ids, i%2 == 1) })
		if !assert.NoError(t, err, "inference %d in its own Ctx", i) || !assert.Equal(t, want[i%2], got, "inference %d", i) {
			return
		}
	}
}
