package dist_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/dist"
	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/nn"
	"github.com/strata-ml/strata/tensor"
)

var tinyGPT = nn.GPTConfig{Vocab: 64, Context: 16, Layers: 2, Heads: 2, Width: 32}

func newGPT(t *testing.T, cfg nn.GPTConfig, seed uint64) *nn.GPT {
	g, err := nn.NewGPT(cfg, nn.Options{Device: tensor.CPU(), DType: tensor.Float32, Rng: rand.New(rand.NewPCG(seed, 1))})
	require.NoError(t, err)
	t.Cleanup(func() { nn.Release(g.Parameters()) })
	return g
}

// param makes a float32 parameter of n elements (or a float64 one).
func param(t *testing.T, name string, dt tensor.DType, n int) *nn.Parameter {
	v, err := tensor.NewKept(tensor.CPU(), dt, memory.RoleParameter, n)
	require.NoError(t, err)
	v.Fill(0)
	t.Cleanup(v.Release)
	return &nn.Parameter{Var: autograd.Param(v, name), Name: name}
}

func names(ps []*nn.Parameter) []string {
	var s []string
	for _, p := range ps {
		s = append(s, p.Name)
	}
	return s
}

func TestAssignBuckets(t *testing.T) {
	f32, f64 := tensor.Float32, tensor.Float64
	ps := []*nn.Parameter{
		param(t, "a", f32, 10),    // 40 B
		param(t, "b", f32, 20),    // 80 B
		param(t, "c", f32, 30),    // 120 B
		param(t, "big", f32, 100), // 400 B: larger than a bucket
		param(t, "frozen", f32, 7),
		param(t, "d", f32, 5), // 20 B
		param(t, "e", f64, 2), // 16 B, another dtype
		param(t, "f", f64, 3), // 24 B
		param(t, "g", f32, 4), // 16 B
	}
	ps[4].SetRequiresGrad(false)
	bs := dist.AssignBuckets(ps, 160)
	var got [][]string
	for _, b := range bs {
		got = append(got, names(b.Params))
		if len(b.Params) > 1 {
			assert.LessOrEqual(t, b.Bytes(), int64(160), "bucket %v", names(b.Params))
		}
		off := 0
		for i, p := range b.Params {
			assert.Equal(t, off, b.Offsets[i], "offset of %s", p.Name)
			assert.Equal(t, p.Value.DType(), b.DType, "dtype of %s", p.Name)
			off += p.Value.Numel()
		}
		assert.Equal(t, off, b.Numel)
	}
	assert.Equal(t, [][]string{{"g"}, {"f", "e"}, {"d"}, {"big"}, {"c"}, {"b", "a"}}, got)
	for _, b := range bs {
		if b.Params[0].Name == "big" {
			assert.Equal(t, int64(400), b.Bytes())
		}
	}

	// The default 25 MiB holds the whole tiny GPT: one bucket, reversed.
	g := newGPT(t, tinyGPT, 1)
	bs = dist.AssignBuckets(g.Parameters(), 0)
	require.Len(t, bs, 1)
	want := names(g.Parameters())
	for i, j := 0, len(want)-1; i < j; i, j = i+1, j-1 {
		want[i], want[j] = want[j], want[i]
	}
	assert.Equal(t, want, names(bs[0].Params))
	assert.Equal(t, "transformer.ln_f.bias", bs[0].Params[0].Name)
	assert.Equal(t, nn.CountParams(g.Parameters()), bs[0].Numel)
}

// batches are the fixed random global batches (B, T) of every step.
func batches(steps, B, T, vocab int) (xs, ys [][]int32) {
	rng := rand.New(rand.NewPCG(42, 42))
	for range steps {
		x, y := make([]int32, B*T), make([]int32, B*T)
		for i := range x {
			x[i], y[i] = int32(rng.IntN(vocab)), int32(rng.IntN(vocab))
		}
		xs, ys = append(xs, x), append(ys, y)
	}
	return xs, ys
}

// flatParams is every parameter's values, concatenated.
func flatParams(ps []*nn.Parameter) []float32 {
	var out []float32
	for _, p := range ps {
		out = append(out, p.Value.Float32s()...)
	}
	return out
}

const (
	ddpSteps = 4
	ddpB     = 8 // the global batch
	ddpLR    = 3e-3
)

// trainStep is one step on rows (b, T) of ids: forward, backward, sync
// (when d is not nil), clipping and AdamW; it returns the rank's loss.
func trainStep(c *tensor.Ctx, g *nn.GPT, opt nn.Optimizer, d *dist.DataParallel, x, y []int32, b int) (float64, error) {
	return stepOn(c, tensor.CPU(), g, opt, d, x, y, b)
}

// stepOn is trainStep with the ids on dev.
func stepOn(c *tensor.Ctx, dev tensor.Device, g *nn.GPT, opt nn.Optimizer, d *dist.DataParallel, x, y []int32, b int) (float64, error) {
	ps := g.Parameters()
	var loss float64
	err := nn.Step(c, func() error {
		nn.ZeroGrad(ps)
		T := len(x) / b
		l := g.Loss(c.FromInt32s(dev, x, b, T), c.FromInt32s(dev, y, b, T))
		if err := l.Backward(); err != nil {
			return err
		}
		if d != nil {
			if err := d.SyncGradients(); err != nil {
				return err
			}
		}
		if _, err := nn.ClipGradNorm(ps, 1); err != nil {
			return err
		}
		loss = l.Item()
		return opt.Step()
	})
	return loss, err
}

// TestDataParallelMatchesSingle is the acceptance test: n ranks, each
// with its slice of the global batch, give after every step the loss and
// the parameters of one rank that trains on the whole batch, and every
// rank's parameters are identical bit for bit.
func TestDataParallelMatchesSingle(t *testing.T) {
	T := tinyGPT.Context
	xs, ys := batches(ddpSteps, ddpB, T, tinyGPT.Vocab)

	// The reference: one rank, the whole batch.
	ref := newGPT(t, tinyGPT, 3)
	refOpt := nn.NewAdamW(ref.Parameters(), ddpLR, 0.1)
	defer refOpt.Release()
	c := tensor.NewCtx()
	var refLoss []float64
	var refParams [][]float32
	for s := range ddpSteps {
		l, err := trainStep(c, ref, refOpt, nil, xs[s], ys[s], ddpB)
		require.NoError(t, err)
		refLoss = append(refLoss, l)
		refParams = append(refParams, flatParams(ref.Parameters()))
	}

	for _, n := range []int{2, 4} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			losses, params, nbuckets, errs := trainRanks(t, n, ddpB/n, xs, ys, false)
			for r, err := range errs {
				require.NoError(t, err, "rank %d", r)
			}
			assert.Greater(t, nbuckets[0], 4, "buckets")
			for s := range ddpSteps {
				for r := 1; r < n; r++ {
					assert.Equal(t, losses[0][s], losses[r][s], "step %d: rank %d's mean loss", s, r)
					assert.True(t, equalBits(params[0][s], params[r][s]), "step %d: rank %d's parameters differ from rank 0's", s, r)
				}
				maxDiff, maxRef := 0.0, 0.0
				for i, v := range refParams[s] {
					maxDiff = max(maxDiff, math.Abs(float64(v)-float64(params[0][s][i])))
					maxRef = max(maxRef, math.Abs(float64(v)))
				}
				lossDiff := math.Abs(refLoss[s] - losses[0][s])
				t.Logf("step %d: loss %.6f (1 rank %.6f, |diff| %.2g), max |param diff| %.2g (max |param| %.2g)",
					s, losses[0][s], refLoss[s], lossDiff, maxDiff, maxRef)
				assert.LessOrEqual(t, lossDiff, lossTol*refLoss[s], "step %d: loss", s)
				assert.LessOrEqual(t, maxDiff, paramTol, "step %d: parameters", s)
			}
		})
	}
}

// trainRanks trains the tiny GPT (seed 3) for ddpSteps steps on n local
// ranks with b rows each of the batches xs, ys, with nn.AdamW or (zero)
// ZeroAdamW, and returns every rank's mean losses and parameters after
// every step, the number of buckets and the ranks' errors. Each rank
// checks that its Ctx holds the same bytes after every step.
func trainRanks(t *testing.T, n, b int, xs, ys [][]int32, zero bool) (losses [][]float64, params [][][]float32, nbuckets []int, errs []error) {
	// Small buckets: several of them, and the (32, 128) weights (16 KiB)
	// larger than one.
	return trainRanksWith(t, n, b, xs, ys, zero, dist.Options{BucketBytes: 12 << 10}, nil)
}

// trainRanksWith is trainRanks with DataParallel's options, each rank's
// Collective wrapped by wrap (nil: as it is), and each model passed to
// setup before training.
func trainRanksWith(t *testing.T, n, b int, xs, ys [][]int32, zero bool, opts dist.Options, wrap func(dist.Collective) dist.Collective, setup ...func(*nn.GPT)) (losses [][]float64, params [][][]float32, nbuckets []int, errs []error) {
	losses = make([][]float64, n)   // [rank][step], the mean over ranks
	params = make([][][]float32, n) // [rank][step]
	nbuckets = make([]int, n)
	models := make([]*nn.GPT, n)
	for r := range n { // built here: require may not run on the ranks' goroutines
		models[r] = newGPT(t, tinyGPT, 3)
		for _, f := range setup {
			f(models[r])
		}
	}
	errs = runRanks(t, n, 60*time.Second, func(c *tensor.Ctx, coll dist.Collective) error {
		r := coll.Rank()
		if wrap != nil {
			coll = wrap(coll)
		}
		var first int64
		return rankRun(c, coll, tensor.CPU(), models[r], opts, zero, b, xs, ys, func(s int, d *dist.DataParallel, mean float64) error {
			nbuckets[r] = len(d.Buckets())
			if want := len(d.Buckets()); !opts.NoOverlap && d.OverlappedBuckets() != want {
				return fmt.Errorf("rank %d, step %d: %d of the %d buckets started during backward", r, s, d.OverlappedBuckets(), want)
			}
			losses[r] = append(losses[r], mean)
			params[r] = append(params[r], flatParams(models[r].Parameters()))
			if s == 0 {
				first = c.BytesInUse()
			} else if c.BytesInUse() != first {
				return fmt.Errorf("rank %d: %d bytes in its Ctx after step %d, %d after the first", r, c.BytesInUse(), s, first)
			}
			return nil
		})
	})
	return losses, params, nbuckets, errs
}

// Tolerances of the comparison with one rank: see the package doc.
const (
	lossTol  = 1e-5 // relative
	paramTol = 1e-5 // absolute; AdamW's steps here are 3e-3
)

func equalBits(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}

// TestBroadcastParameters: ranks built with different seeds start from
// rank 0's weights, bit for bit, frozen parameters included.
func TestBroadcastParameters(t *testing.T) {
	const n = 3
	models := make([]*nn.GPT, n)
	for r := range n {
		models[r] = newGPT(t, tinyGPT, uint64(10+r))
		models[r].Wpe.Weight.SetRequiresGrad(false)
	}
	want := flatParams(models[0].Parameters())
	require.False(t, equalBits(want, flatParams(models[1].Parameters())))
	errs := runRanks(t, n, 30*time.Second, func(c *tensor.Ctx, coll dist.Collective) error {
		d, err := dist.New(coll, models[coll.Rank()].Parameters(), dist.Options{BucketBytes: 8 << 10})
		if err != nil {
			return err
		}
		defer d.Release()
		return d.BroadcastParameters()
	})
	for r := range n {
		require.NoError(t, errs[r], "rank %d", r)
		assert.True(t, equalBits(want, flatParams(models[r].Parameters())), "rank %d", r)
	}
}

// TestSyncGradientsMissing: a parameter without a gradient on one rank
// contributes zeros (every rank makes the same calls) and gets the mean
// on every rank; one that no rank gave a gradient keeps none.
func TestSyncGradientsMissing(t *testing.T) {
	const n = 2
	ps := make([][]*nn.Parameter, n)
	for r := range n {
		ps[r] = []*nn.Parameter{param(t, "used", tensor.Float32, 3), param(t, "some", tensor.Float32, 2), param(t, "none", tensor.Float32, 4)}
	}
	grads := make([][][]float32, n)
	errs := runRanks(t, n, 10*time.Second, func(c *tensor.Ctx, coll dist.Collective) error {
		r := coll.Rank()
		p := ps[r]
		setGrad := func(q *nn.Parameter, v []float32) {
			g, err := tensor.NewKept(tensor.CPU(), tensor.Float32, memory.RoleGradient, len(v))
			if err != nil {
				panic(err)
			}
			g.CopyFrom(tensor.FromFloat32s(tensor.CPU(), v, len(v)))
			q.Grad = g
		}
		var err error
		if perr := tensor.Try(func() {
			setGrad(p[0], []float32{float32(r + 1), 2, 3})
			if r == 0 {
				setGrad(p[1], []float32{4, 6})
			}
			d, e := dist.New(coll, p, dist.Options{BucketBytes: 8})
			if e != nil {
				err = e
				return
			}
			defer d.Release()
			if err = d.SyncGradients(); err != nil {
				return
			}
			for _, q := range p {
				if q.Grad == nil {
					grads[r] = append(grads[r], nil)
				} else {
					grads[r] = append(grads[r], q.Grad.Float32s())
				}
			}
		}); perr != nil {
			return perr
		}
		return err
	})
	for r := range n {
		require.NoError(t, errs[r], "rank %d", r)
		assert.Equal(t, [][]float32{{1.5, 2, 3}, {2, 3}, nil}, grads[r], "rank %d", r)
		for _, q := range ps[r] {
			q.ZeroGrad()
		}
	}
}

// A parameter whose gradient is kept in bfloat16 (SetGradDType) and that
// has no gradient on some ranks gets the mean there in bfloat16 too: the
// ranks' gradients are equal in dtype and bits (not float32 on some).
func TestSyncGradientsHalfGrad(t *testing.T) {
	const n = 3
	dts := make([]tensor.DType, n)
	vals := make([][]float32, n)
	errs := runRanks(t, n, 10*time.Second, func(c *tensor.Ctx, coll dist.Collective) error {
		p := param(t, "w", tensor.Float32, 2)
		if err := p.Var.SetGradDType(tensor.BFloat16); err != nil {
			return err
		}
		d, err := dist.New(coll, []*nn.Parameter{p}, dist.Options{})
		if err != nil {
			return err
		}
		defer d.Release()
		return inScope(c, func() error {
			if coll.Rank() == 0 {
				x := autograd.Const(c.FromFloat32s(tensor.CPU(), []float32{0.1, 0.7}, 2))
				if err := autograd.Sum(autograd.Mul(x, p.Var), false).Backward(); err != nil {
					return err
				}
			}
			if err := d.SyncGradients(); err != nil {
				return err
			}
			dts[coll.Rank()], vals[coll.Rank()] = p.Grad.DType(), p.Grad.Float32s()
			p.ZeroGrad()
			return nil
		})
	})
	for r := range n {
		require.NoError(t, errs[r], "rank %d", r)
		require.Equal(t, tensor.BFloat16, dts[r], "rank %d", r)
		require.Equal(t, vals[0], vals[r], "rank %d", r)
	}
}

// TestDataParallelErrors: ranks whose models differ, or a rank whose step
// fails, give errors on every rank, without hanging.
func TestDataParallelErrors(t *testing.T) {
	t.Run("different models", func(t *testing.T) {
		small := tinyGPT
		small.Width = 16
		models := []*nn.GPT{newGPT(t, tinyGPT, 1), newGPT(t, small, 1)}
		xs, ys := batches(1, 2, tinyGPT.Context, tinyGPT.Vocab)
		errs := runRanks(t, 2, 30*time.Second, func(c *tensor.Ctx, coll dist.Collective) error {
			g := models[coll.Rank()]
			d, err := dist.New(coll, g.Parameters(), dist.Options{})
			if err != nil {
				return err
			}
			defer d.Release()
			opt := nn.NewAdamW(g.Parameters(), ddpLR, 0)
			defer opt.Release()
			_, err = trainStep(c, g, opt, d, xs[0], ys[0], 2)
			return err
		})
		for r := range 2 {
			assert.ErrorIs(t, errs[r], dist.ErrMismatch, "rank %d", r)
		}
	})
	t.Run("failing rank", func(t *testing.T) {
		models := []*nn.GPT{newGPT(t, tinyGPT, 1), newGPT(t, tinyGPT, 1), newGPT(t, tinyGPT, 1)}
		xs, ys := batches(1, 3, tinyGPT.Context, tinyGPT.Vocab)
		bad := errors.New("rank 1's batch failed to load")
		errs := runRanks(t, 3, 30*time.Second, func(c *tensor.Ctx, coll dist.Collective) error {
			g := models[coll.Rank()]
			d, err := dist.New(coll, g.Parameters(), dist.Options{BucketBytes: 4 << 10})
			if err != nil {
				return err
			}
			defer d.Release()
			if coll.Rank() == 1 {
				d.Abort(bad)
				return bad
			}
			opt := nn.NewAdamW(g.Parameters(), ddpLR, 0)
			defer opt.Release()
			rows := tinyGPT.Context
			r := coll.Rank()
			_, err = trainStep(c, g, opt, d, xs[0][r*rows:(r+1)*rows], ys[0][r*rows:(r+1)*rows], 1)
			return err
		})
		for _, r := range []int{0, 2} {
			assert.ErrorIs(t, errs[r], dist.ErrAborted, "rank %d", r)
			assert.ErrorIs(t, errs[r], bad, "rank %d", r)
		}
	})
}

// rankOptimizer is a rank's optimizer in the data-parallel tests: AdamW,
// or with zero its state sharded over the ranks (ZeroAdamW).
func rankOptimizer(coll dist.Collective, ps []*nn.Parameter, zero bool) (nn.Optimizer, error) {
	if zero {
		return dist.NewZeroAdamW(coll, ps, ddpLR, 0.1)
	}
	return nn.NewAdamW(ps, ddpLR, 0.1), nil
}

// rankRun is one rank's part of a data-parallel test: a DataParallel
// over coll with opts, rank 0's weights broadcast, AdamW or (zero)
// ZeroAdamW, then ddpSteps steps on the rank's b rows of xs, ys on dev,
// each followed by each(step, d, the loss's mean over the ranks). An
// error of each, like any failure, aborts the group.
func rankRun(c *tensor.Ctx, coll dist.Collective, dev tensor.Device, g *nn.GPT, opts dist.Options, zero bool, b int, xs, ys [][]int32,
	each func(s int, d *dist.DataParallel, mean float64) error) error {
	d, err := dist.New(coll, g.Parameters(), opts)
	if err != nil {
		coll.Abort(err)
		return err
	}
	defer d.Release()
	if err := d.BroadcastParameters(); err != nil {
		return err
	}
	opt, err := rankOptimizer(coll, g.Parameters(), zero)
	if err != nil {
		d.Abort(err)
		return err
	}
	defer opt.Release()
	r, rows := coll.Rank(), b*tinyGPT.Context
	for s := range ddpSteps {
		l, err := stepOn(c, dev, g, opt, d, xs[s][r*rows:(r+1)*rows], ys[s][r*rows:(r+1)*rows], b)
		if err != nil {
			d.Abort(err)
			return err
		}
		mean, err := d.AllReduceMean(l)
		if err != nil {
			return err
		}
		if err := each(s, d, mean); err != nil {
			d.Abort(err)
			return err
		}
	}
	return nil
}

// TestBroadcastParametersRefusesAView: a parameter whose value is a
// non-contiguous view cannot take rank 0's values; BroadcastParameters
// says which, before any call, leaving every parameter as it was (it
// used to fail while copying back, unnamed, after overwriting the
// buckets before that parameter's).
func TestBroadcastParametersRefusesAView(t *testing.T) {
	vals := make([][]float32, 2)
	errs := runRanks(t, 2, 10*time.Second, func(c *tensor.Ctx, coll dist.Collective) error {
		v, err := tensor.NewKept(tensor.CPU(), tensor.Float32, memory.RoleParameter, 2, 3)
		if err != nil {
			return err
		}
		defer v.Release()
		v.Fill(1)
		w := v.Transpose(0, 1)
		tensor.Keep(w)
		defer w.Release()
		a := param(t, "a", tensor.Float32, 4)
		a.Value.Fill(float64(coll.Rank() + 1))
		ps := []*nn.Parameter{{Var: autograd.Param(w, "w"), Name: "w"}, a} // a's bucket is first
		d, err := dist.New(coll, ps, dist.Options{BucketBytes: 1, NoOverlap: true})
		if err != nil {
			coll.Abort(err)
			return err
		}
		defer d.Release()
		err = d.BroadcastParameters()
		vals[coll.Rank()] = a.Value.Float32s()
		return err
	})
	for r, err := range errs {
		require.Error(t, err, "rank %d", r)
		if !errors.Is(err, dist.ErrAborted) {
			require.ErrorIs(t, err, tensor.ErrArgument, "rank %d", r)
			require.ErrorContains(t, err, `parameter "w" is not contiguous`, "rank %d", r)
		}
	}
	assert.Equal(t, []float32{2, 2, 2, 2}, vals[1], "rank 1's a keeps its value")
}
