package dist_test

// Client tests: the package used as a program would, with misuse and
// edge cases; every wait is bounded (runRanks fails the test on a hang).

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
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

// shaped is a float parameter of the given shape, filled with 1.
func shaped(t *testing.T, name string, dt tensor.DType, shape ...int) *nn.Parameter {
	v, err := tensor.NewKept(tensor.CPU(), dt, memory.RoleParameter, shape...)
	require.NoError(t, err)
	v.Fill(1)
	t.Cleanup(v.Release)
	p := &nn.Parameter{Var: autograd.Param(v, name), Name: name}
	t.Cleanup(p.ZeroGrad)
	return p
}

// setGrads gives every trainable parameter of ps a gradient of value v.
func setGrads(ps []*nn.Parameter, v float64) error {
	for _, p := range ps {
		if !p.RequiresGrad() {
			continue
		}
		g, err := tensor.NewKept(p.Value.Device(), p.Value.DType(), memory.RoleGradient, p.Value.Shape()...)
		if err != nil {
			return err
		}
		g.Fill(v)
		p.ZeroGrad()
		p.Grad = g
	}
	return nil
}

// Ranks whose parameter lists differ (shape, order, names, which are
// trainable, how many, dtype, gradient dtype, none at all, the bucket
// size) get an error wrapping ErrMismatch on every rank from
// BroadcastParameters and SyncGradients (with and without the overlap):
// never a hang, never a silently mixed-up mean.
func TestClientMismatchedParameters(t *testing.T) {
	f32, f64 := tensor.Float32, tensor.Float64
	frozen := func(p *nn.Parameter) *nn.Parameter { p.SetRequiresGrad(false); return p }
	halfGrad := func(p *nn.Parameter) *nn.Parameter { require.NoError(t, p.SetGradDType(tensor.BFloat16)); return p }
	cases := []struct {
		name  string
		lists func() [][]*nn.Parameter
		opts  []dist.Options // per rank; nil: the zero Options
	}{
		{"shape", func() [][]*nn.Parameter {
			return [][]*nn.Parameter{{shaped(t, "a", f32, 2, 3)}, {shaped(t, "a", f32, 3, 2)}}
		}, nil},
		{"order", func() [][]*nn.Parameter {
			return [][]*nn.Parameter{{shaped(t, "a", f32, 4), shaped(t, "b", f32, 4)}, {shaped(t, "b", f32, 4), shaped(t, "a", f32, 4)}}
		}, nil},
		{"name", func() [][]*nn.Parameter {
			return [][]*nn.Parameter{{shaped(t, "a", f32, 4)}, {shaped(t, "z", f32, 4)}}
		}, nil},
		{"frozen", func() [][]*nn.Parameter {
			return [][]*nn.Parameter{{frozen(shaped(t, "a", f32, 4)), shaped(t, "b", f32, 4)}, {shaped(t, "a", f32, 4), frozen(shaped(t, "b", f32, 4))}}
		}, nil},
		{"all frozen on one rank", func() [][]*nn.Parameter {
			return [][]*nn.Parameter{{frozen(shaped(t, "a", f32, 4))}, {shaped(t, "a", f32, 4)}}
		}, nil},
		{"none on one rank", func() [][]*nn.Parameter {
			return [][]*nn.Parameter{{}, {shaped(t, "a", f32, 4)}}
		}, nil},
		{"count", func() [][]*nn.Parameter {
			return [][]*nn.Parameter{{shaped(t, "a", f32, 4)}, {shaped(t, "a", f32, 4), shaped(t, "b", f32, 4)}}
		}, []dist.Options{{BucketBytes: 16}, {BucketBytes: 16}}},
		{"dtype", func() [][]*nn.Parameter {
			return [][]*nn.Parameter{{shaped(t, "a", f32, 4)}, {shaped(t, "a", f64, 4)}}
		}, nil},
		{"gradient dtype", func() [][]*nn.Parameter {
			return [][]*nn.Parameter{{shaped(t, "a", f32, 4)}, {halfGrad(shaped(t, "a", f32, 4))}}
		}, nil},
		{"bucket size", func() [][]*nn.Parameter {
			return [][]*nn.Parameter{{shaped(t, "a", f32, 4), shaped(t, "b", f32, 4)}, {shaped(t, "a", f32, 4), shaped(t, "b", f32, 4)}}
		}, []dist.Options{{BucketBytes: 16}, {BucketBytes: 32}}},
	}
	for _, c := range cases {
		for _, what := range []string{"broadcast", "sync", "sync NoOverlap"} {
			t.Run(c.name+"/"+what, func(t *testing.T) {
				lists := c.lists()
				n := len(lists)
				errs := runRanks(t, n, 10*time.Second, func(_ *tensor.Ctx, coll dist.Collective) error {
					ps := lists[coll.Rank()]
					var opts dist.Options
					if c.opts != nil {
						opts = c.opts[coll.Rank()]
					}
					opts.NoOverlap = what == "sync NoOverlap"
					d, err := dist.New(coll, ps, opts)
					if err != nil {
						coll.Abort(err)
						return err
					}
					defer d.Release()
					if what == "broadcast" {
						return d.BroadcastParameters()
					}
					if err := setGrads(ps, float64(coll.Rank()+1)); err != nil {
						d.Abort(err)
						return err
					}
					return d.SyncGradients()
				})
				for r, err := range errs {
					require.Error(t, err, "rank %d", r)
					t.Logf("rank %d: %v", r, err)
					assert.ErrorIs(t, err, dist.ErrMismatch, "rank %d", r)
				}
			})
		}
	}
}

// mlp is a tiny model: Linear(4, 8), ReLU, Linear(8, 2).
type mlp struct{ l1, l2 *nn.Linear }

func newMLP(t *testing.T, seed uint64) *mlp {
	o := nn.Options{Device: tensor.CPU(), DType: tensor.Float32, Rng: rand.New(rand.NewPCG(seed, 7))}
	m := &mlp{l1: nn.Must(nn.NewLinear(o, "l1", 4, 8, true, 0)), l2: nn.Must(nn.NewLinear(o, "l2", 8, 2, true, 0))}
	t.Cleanup(func() { nn.Release(m.Parameters()) })
	return m
}

func (m *mlp) Parameters() []*nn.Parameter { return nn.Collect(m.l1, m.l2) }

func (m *mlp) loss(c *tensor.Ctx, x, y []float32) *autograd.Var {
	rows := len(x) / 4
	in := autograd.Const(c.FromFloat32s(tensor.CPU(), x, rows, 4))
	tgt := autograd.Const(c.FromFloat32s(tensor.CPU(), y, rows, 2))
	return nn.MSELoss(m.l2.Forward(nn.ReLU(m.l1.Forward(in))), tgt, nn.ReduceMean)
}

// The package's claim: N ranks, each with an equal slice of the batch,
// train as one rank on the whole batch, up to float32 rounding; every
// rank ends with the same bits. For 1, 2, 3, 4 and 6 ranks (12 rows, so
// the slices are equal; 4 parameters), with and without the overlap, and
// bucket sizes from 1 byte to huge.
func TestClientMatchesOneRank(t *testing.T) {
	const rows, steps = 12, 5
	rng := rand.New(rand.NewPCG(1, 2))
	xs, ys := make([][]float32, steps), make([][]float32, steps)
	for s := range steps {
		for range rows * 4 {
			xs[s] = append(xs[s], float32(rng.NormFloat64()))
		}
		for range rows * 2 {
			ys[s] = append(ys[s], float32(rng.NormFloat64()))
		}
	}
	// The reference: one process, no dist.
	ref := newMLP(t, 5)
	opt := nn.NewAdamW(ref.Parameters(), 1e-2, 0.1)
	defer opt.Release()
	c := tensor.NewCtx()
	var refGrads, refParams [][]float32
	for s := range steps {
		require.NoError(t, nn.Step(c, func() error {
			nn.ZeroGrad(ref.Parameters())
			if err := ref.loss(c, xs[s], ys[s]).Backward(); err != nil {
				return err
			}
			refGrads = append(refGrads, flatGrads(ref.Parameters()))
			return opt.Step()
		}))
		refParams = append(refParams, flatParams(ref.Parameters()))
	}
	for _, n := range []int{1, 2, 3, 4, 6} { // 6: more ranks than parameters
		for _, opts := range []dist.Options{{}, {NoOverlap: true}, {BucketBytes: 1}, {BucketBytes: -1}, {BucketBytes: math.MaxInt64}, {BucketBytes: 40, NoOverlap: true}} {
			t.Run(fmt.Sprintf("%d ranks %+v", n, opts), func(t *testing.T) {
				models := make([]*mlp, n)
				for r := range n {
					models[r] = newMLP(t, uint64(5+100*r)) // rank 0's is the reference's; BroadcastParameters hands it out
				}
				grads := make([][][]float32, n)
				params := make([][][]float32, n)
				errs := runRanks(t, n, 30*time.Second, func(c *tensor.Ctx, coll dist.Collective) error {
					r := coll.Rank()
					m := models[r]
					d, err := dist.New(coll, m.Parameters(), opts)
					if err != nil {
						coll.Abort(err)
						return err
					}
					defer d.Release()
					if err := d.BroadcastParameters(); err != nil {
						return err
					}
					o := nn.NewAdamW(m.Parameters(), 1e-2, 0.1)
					defer o.Release()
					k := rows / n
					for s := range steps {
						err := nn.Step(c, func() error {
							nn.ZeroGrad(m.Parameters())
							if err := m.loss(c, xs[s][r*k*4:(r+1)*k*4], ys[s][r*k*2:(r+1)*k*2]).Backward(); err != nil {
								return err
							}
							if err := d.SyncGradients(); err != nil {
								return err
							}
							grads[r] = append(grads[r], flatGrads(m.Parameters()))
							return o.Step()
						})
						if err != nil {
							d.Abort(err)
							return err
						}
						params[r] = append(params[r], flatParams(m.Parameters()))
					}
					return nil
				})
				for r, err := range errs {
					require.NoError(t, err, "rank %d", r)
				}
				for s := range steps {
					for r := 1; r < n; r++ {
						require.True(t, equalBits(params[0][s], params[r][s]), "step %d: rank %d's parameters differ from rank 0's", s, r)
					}
					for i, g := range refGrads[s] {
						require.InDelta(t, g, grads[0][s][i], 1e-6+1e-5*math.Abs(float64(g)), "step %d: gradient %d", s, i)
					}
					for i, p := range refParams[s] {
						require.InDelta(t, p, params[0][s][i], 1e-5, "step %d: parameter %d", s, i)
					}
				}
			})
		}
	}
}

func flatGrads(ps []*nn.Parameter) []float32 {
	var out []float32
	for _, p := range ps {
		if p.Grad == nil {
			out = append(out, make([]float32, p.Value.Numel())...)
			continue
		}
		out = append(out, p.Grad.Float32s()...)
	}
	return out
}

// Bucket sizes: 0 and negative are the default (one bucket here), 1 byte
// a bucket per parameter, a huge one a single bucket.
func TestClientBucketSizes(t *testing.T) {
	ps := []*nn.Parameter{shaped(t, "a", tensor.Float32, 3), shaped(t, "b", tensor.Float32, 2, 2), shaped(t, "c", tensor.Float32, 1)}
	for _, c := range []struct {
		bytes int64
		want  int
	}{{0, 1}, {-1, 1}, {math.MinInt64, 1}, {1, 3}, {16, 3}, {20, 2}, {math.MaxInt64, 1}} {
		bs := dist.AssignBuckets(ps, c.bytes)
		assert.Len(t, bs, c.want, "BucketBytes %d", c.bytes)
		d, err := dist.New(dist.NewLocalGroup(1)[0], ps, dist.Options{BucketBytes: c.bytes})
		require.NoError(t, err)
		assert.Len(t, d.Buckets(), c.want, "BucketBytes %d", c.bytes)
		d.Release()
	}
}

// A rank that fails in the middle of a step (after its backward pass
// started buckets) and aborts: the others, waiting in SyncGradients, get
// an error wrapping ErrAborted and the cause; Release returns on every
// rank; the group stays failed for every later call (a new DataParallel
// on it, BroadcastParameters, SyncGradients, AllReduceMean, ZeroAdamW),
// and Release twice is harmless.
func TestClientAbortMidStep(t *testing.T) {
	const n, k = 3, 4
	bad := errors.New("rank 1 ran out of data")
	later := make([][]error, n)
	errs := runRanks(t, n, 20*time.Second, func(c *tensor.Ctx, coll dist.Collective) error {
		r := coll.Rank()
		ps := chain(t, k, r)
		d, err := dist.New(coll, ps, dist.Options{BucketBytes: 16})
		if err != nil {
			coll.Abort(err)
			return err
		}
		err = inScope(c, func() error {
			if err := chainLoss(c, ps, func() {}).Backward(); err != nil {
				return err
			}
			if r == 1 {
				time.Sleep(50 * time.Millisecond) // the others wait in SyncGradients
				d.Abort(bad)
				return bad
			}
			return d.SyncGradients()
		})
		d.Release()
		d.Release()
		// Reuse of the failed group.
		d2, nerr := dist.New(coll, ps, dist.Options{BucketBytes: 16})
		if nerr != nil {
			return nerr
		}
		defer d2.Release()
		later[r] = append(later[r], d2.BroadcastParameters(), d2.SyncGradients())
		_, merr := d2.AllReduceMean(1)
		later[r] = append(later[r], merr)
		z, zerr := dist.NewZeroAdamW(coll, ps, 1e-3, 0)
		if zerr != nil {
			return zerr
		}
		defer z.Release()
		later[r] = append(later[r], z.Step())
		z.Release()
		z.Release()
		return err
	})
	assert.Equal(t, bad, errs[1])
	for _, r := range []int{0, 2} {
		assert.ErrorIs(t, errs[r], dist.ErrAborted, "rank %d", r)
		assert.ErrorIs(t, errs[r], bad, "rank %d", r)
	}
	for r := range n {
		require.Len(t, later[r], 4, "rank %d", r)
		for i, err := range later[r] {
			assert.ErrorIs(t, err, dist.ErrAborted, "rank %d, later call %d", r, i)
			assert.ErrorIs(t, err, bad, "rank %d, later call %d", r, i)
		}
	}
}

// SyncGradients twice in a step (on every rank) gives the mean again
// (the mean of equal means), no error, and the next step is normal; a
// rank with no backward pass (no gradients) gets the others' mean.
func TestClientSyncTwiceAndWithoutBackward(t *testing.T) {
	const n, k = 2, 3
	for _, noOverlap := range []bool{false, true} {
		t.Run(fmt.Sprintf("NoOverlap=%v", noOverlap), func(t *testing.T) {
			grads := make([][][]float32, n)
			overlapped := make([][]int, n)
			errs := runRanks(t, n, 20*time.Second, func(c *tensor.Ctx, coll dist.Collective) error {
				r := coll.Rank()
				ps := chain(t, k, 0) // the same values on every rank
				d, err := dist.New(coll, ps, dist.Options{BucketBytes: 16, NoOverlap: noOverlap})
				if err != nil {
					coll.Abort(err)
					return err
				}
				defer d.Release()
				err = inScope(c, func() error {
					for s := range 3 {
						nn.ZeroGrad(ps)
						if s != 1 || r == 0 { // step 1: rank 1 has no backward pass
							if err := chainLoss(c, ps, func() {}).Backward(); err != nil {
								return err
							}
						}
						if err := d.SyncGradients(); err != nil {
							return err
						}
						overlapped[r] = append(overlapped[r], d.OverlappedBuckets())
						if s == 0 {
							if err := d.SyncGradients(); err != nil {
								return err
							}
						}
						grads[r] = append(grads[r], flatGrads(ps))
					}
					return nil
				})
				if err != nil {
					d.Abort(err)
				}
				return err
			})
			for r, err := range errs {
				require.NoError(t, err, "rank %d", r)
			}
			for r := range n {
				assert.Equal(t, grads[0], grads[r], "rank %d", r)
				for i, g := range grads[r][1] {
					assert.InDelta(t, grads[r][0][i]/2, g, 1e-6, "rank %d: step 1 (one rank's gradient, halved), element %d", r, i)
				}
				assert.Equal(t, grads[r][0], grads[r][2], "rank %d: steps 0 (synced twice) and 2", r)
			}
			if !noOverlap {
				assert.Equal(t, []int{k, k, k}, overlapped[0])
				assert.Equal(t, []int{k, 0, k}, overlapped[1])
			}
		})
	}
}

// Misuse of New and of the local group: errors naming the problem.
func TestClientArgumentErrors(t *testing.T) {
	coll := dist.NewLocalGroup(1)[0]
	_, err := dist.New(nil, nil, dist.Options{})
	assert.ErrorIs(t, err, tensor.ErrArgument)
	_, err = dist.New(coll, []*nn.Parameter{nil}, dist.Options{})
	assert.ErrorIs(t, err, tensor.ErrArgument)
	p := shaped(t, "w", tensor.Float32, 2)
	_, err = dist.New(coll, []*nn.Parameter{p, p}, dist.Options{})
	assert.ErrorIs(t, err, tensor.ErrArgument)
	assert.ErrorContains(t, err, `"w"`)
	assert.False(t, p.HasGradHook(), "a failed New leaves no hook")
	_, err = dist.NewZeroAdamW(nil, []*nn.Parameter{p}, 1e-3, 0)
	assert.ErrorIs(t, err, tensor.ErrArgument)
	_, err = dist.NewZeroAdamW(coll, nil, 1e-3, 0)
	assert.ErrorIs(t, err, tensor.ErrArgument)
	for _, n := range []int{0, -1} {
		assert.PanicsWithValue(t, fmt.Sprintf("dist: NewLocalGroup(%d): want n >= 1", n), func() { dist.NewLocalGroup(n) })
	}

	// The local group's bad calls.
	g := dist.NewLocalGroup(1)
	assert.ErrorIs(t, g[0].AllReduceSum(nil), tensor.ErrArgument)
	g = dist.NewLocalGroup(1)
	x := tensor.Zeros(tensor.CPU(), tensor.Float32, 3)
	x.Release()
	assert.ErrorIs(t, g[0].AllGather(x), tensor.ErrArgument)
	// Empty tensors are fine.
	g = dist.NewLocalGroup(2)
	var wg sync.WaitGroup
	res := make([]error, 2)
	for r := range 2 {
		wg.Go(func() {
			e := tensor.Zeros(tensor.CPU(), tensor.Float32, 0)
			defer e.Release()
			res[r] = errors.Join(g[r].AllReduceSum(e), g[r].ReduceScatterSum(e), g[r].AllGather(e))
		})
	}
	wg.Wait()
	for r := range 2 {
		assert.NoError(t, res[r], "rank %d", r)
	}
}

// Two goroutines using one rank at once is refused (on the local group)
// and fails the group, rather than summing a rank twice: both calls of
// rank 0 return errors (neither waits for rank 1 forever), and rank 1's
// call after them finds the group failed. Rank 1 calls only afterwards,
// so that no timing decides which calls pair up.
func TestClientSameRankTwice(t *testing.T) {
	g := dist.NewLocalGroup(2)
	res := make([]error, 3)
	call := func(i, r int) {
		x := tensor.Zeros(tensor.CPU(), tensor.Float32, 2)
		defer x.Release()
		res[i] = g[r].AllReduceSum(x)
	}
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Go(func() { call(i, 0) })
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("deadlock: two calls of rank 0 at once were not refused")
	}
	call(2, 1)
	for i, err := range res {
		assert.Error(t, err, "call %d", i)
	}
}

// ZeroAdamW with fewer elements than ranks (some ranks own only padding),
// the learning rate changed every step, and a one-rank group: nn.AdamW's
// parameters bit for bit on every rank.
func TestClientZeroFewerElementsThanRanks(t *testing.T) {
	const steps = 4
	lrs := []float64{1e-2, 5e-3, 0, 2e-2}
	mk := func() []*nn.Parameter {
		a, b := shaped(t, "a", tensor.Float32, 1), shaped(t, "b", tensor.Float32, 2)
		b.Decay = true
		f := shaped(t, "frozen", tensor.Float32, 3)
		f.SetRequiresGrad(false)
		return []*nn.Parameter{a, f, b}
	}
	grad := func(s int) float64 { return 0.1 * float64(s+1) }
	ref := mk()
	opt := nn.NewAdamW(ref, lrs[0], 0.1)
	defer opt.Release()
	for s := range steps {
		require.NoError(t, setGrads(ref, grad(s)))
		opt.SetLR(lrs[s])
		require.NoError(t, opt.Step())
	}
	want := flatParams(ref)
	for _, n := range []int{1, 5, 8} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			lists := make([][]*nn.Parameter, n)
			for r := range n {
				lists[r] = mk()
			}
			shard := make([]int, n)
			errs := runRanks(t, n, 20*time.Second, func(c *tensor.Ctx, coll dist.Collective) error {
				ps := lists[coll.Rank()]
				z, err := dist.NewZeroAdamW(coll, ps, lrs[0], 0.1)
				if err != nil {
					coll.Abort(err)
					return err
				}
				defer z.Release()
				shard[coll.Rank()] = z.ShardElements()
				for s := range steps {
					if err := setGrads(ps, grad(s)); err != nil {
						coll.Abort(err)
						return err
					}
					z.SetLR(lrs[s])
					if err := z.Step(); err != nil {
						return err
					}
				}
				if z.Steps() != steps {
					return fmt.Errorf("Steps %d", z.Steps())
				}
				return nil
			})
			for r := range n {
				require.NoError(t, errs[r], "rank %d", r)
				assert.Equal(t, (3+n-1)/n, shard[r])
				assert.True(t, equalBits(want, flatParams(lists[r])), "rank %d: %v, want %v", r, flatParams(lists[r]), want)
			}
		})
	}
}

// ZeroAdamW on ranks whose parameter lists differ but hold as many
// elements (shapes, order): an error wrapping ErrMismatch on every rank,
// not parameters silently mixed up by the all-gather.
func TestClientZeroMismatchedParameters(t *testing.T) {
	f32 := tensor.Float32
	for name, lists := range map[string][][]*nn.Parameter{
		"order": {{shaped(t, "a", f32, 2), shaped(t, "b", f32, 4)}, {shaped(t, "b", f32, 4), shaped(t, "a", f32, 2)}},
		"shape": {{shaped(t, "a", f32, 2, 3)}, {shaped(t, "a", f32, 3, 2)}},
		"count": {{shaped(t, "a", f32, 2), shaped(t, "b", f32, 4)}, {shaped(t, "a", f32, 6)}},
	} {
		t.Run(name, func(t *testing.T) {
			errs := runRanks(t, 2, 10*time.Second, func(c *tensor.Ctx, coll dist.Collective) error {
				ps := lists[coll.Rank()]
				z, err := dist.NewZeroAdamW(coll, ps, 1e-2, 0)
				if err != nil {
					coll.Abort(err)
					return err
				}
				defer z.Release()
				if err := setGrads(ps, float64(coll.Rank()+1)); err != nil {
					coll.Abort(err)
					return err
				}
				return z.Step()
			})
			for r, err := range errs {
				assert.ErrorIs(t, err, dist.ErrMismatch, "rank %d", r)
			}
		})
	}
}

// A watchdog aborting the group from another goroutine while the ranks
// train: every rank returns an error wrapping the cause (run with -race).
func TestClientConcurrentAbort(t *testing.T) {
	const n = 3
	boom := errors.New("watchdog")
	group := dist.NewLocalGroup(n)
	models := make([]*mlp, n)
	for r := range n {
		models[r] = newMLP(t, 1)
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Go(func() {
			c := tensor.NewCtx()
			m := models[r]
			d, err := dist.New(group[r], m.Parameters(), dist.Options{BucketBytes: 64})
			if err != nil {
				errs[r] = err
				return
			}
			defer d.Release()
			x := make([]float32, 8)
			y := make([]float32, 4)
			for { // until the abort
				err := nn.Step(c, func() error {
					nn.ZeroGrad(m.Parameters())
					if err := m.loss(c, x, y).Backward(); err != nil {
						return err
					}
					if err := d.SyncGradients(); err != nil {
						return err
					}
					_, err := d.AllReduceMean(1)
					return err
				})
				if err != nil {
					errs[r] = err
					return
				}
			}
		})
	}
	time.Sleep(30 * time.Millisecond)
	group[2].Abort(boom)
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("deadlock")
	}
	for r, err := range errs {
		assert.ErrorIs(t, err, boom, "rank %d", r)
	}
}

// A parameter frozen when New assigned the buckets and unfrozen later
// (gradual unfreezing) is not in any bucket: its gradient, different on
// every rank, would be applied unreduced and the replicas would drift
// apart. SyncGradients refuses it, naming the parameter, on every rank.
func TestClientUnfrozenAfterNew(t *testing.T) {
	const n = 2
	for _, noOverlap := range []bool{false, true} {
		t.Run(fmt.Sprintf("NoOverlap=%v", noOverlap), func(t *testing.T) {
			lists := make([][]*nn.Parameter, n)
			for r := range n {
				lists[r] = []*nn.Parameter{shaped(t, "a", tensor.Float32, 2), shaped(t, "b", tensor.Float32, 2)}
				lists[r][1].SetRequiresGrad(false)
			}
			errs := runRanks(t, n, 10*time.Second, func(c *tensor.Ctx, coll dist.Collective) error {
				ps := lists[coll.Rank()]
				d, err := dist.New(coll, ps, dist.Options{NoOverlap: noOverlap})
				if err != nil {
					coll.Abort(err)
					return err
				}
				defer d.Release()
				ps[1].SetRequiresGrad(true) // unfrozen on every rank
				return inScope(c, func() error {
					x := autograd.Const(c.FromFloat32s(tensor.CPU(), []float32{1, float32(coll.Rank() + 1)}, 2))
					l := autograd.Sum(autograd.Mul(autograd.Mul(x, ps[0].Var), ps[1].Var), false)
					if err := l.Backward(); err != nil {
						d.Abort(err)
						return err
					}
					return d.SyncGradients()
				})
			})
			for r, err := range errs {
				require.Error(t, err, "rank %d", r)
				assert.ErrorContains(t, err, `"b"`, "rank %d", r)
				assert.ErrorContains(t, err, "frozen", "rank %d", r)
			}
		})
	}
}

// ZeroAdamW over a parameter frozen at NewZeroAdamW and unfrozen later:
// it has no place in the shards, so Step refuses its gradient (nn.AdamW
// would update it) instead of silently leaving it as it was.
func TestClientZeroUnfrozenAfterNew(t *testing.T) {
	a, b := shaped(t, "a", tensor.Float32, 2), shaped(t, "b", tensor.Float32, 2)
	b.SetRequiresGrad(false)
	z, err := dist.NewZeroAdamW(dist.NewLocalGroup(1)[0], []*nn.Parameter{a, b}, 1e-2, 0)
	require.NoError(t, err)
	defer z.Release()
	b.SetRequiresGrad(true)
	require.NoError(t, setGrads([]*nn.Parameter{a, b}, 1))
	err = z.Step()
	require.ErrorIs(t, err, tensor.ErrArgument)
	assert.ErrorContains(t, err, `"b"`)
	assert.ErrorContains(t, err, "frozen")
	assert.Equal(t, []float32{1, 1, 1, 1}, flatParams([]*nn.Parameter{a, b}), "nothing changed")
}

// A parameter frozen after NewZeroAdamW that still holds a gradient is
// skipped, as nn.AdamW skips it (a gradient counts only on a parameter
// that requires one): the parameters equal nn.AdamW's bit for bit.
func TestClientZeroFrozenLaterSkipped(t *testing.T) {
	mk := func() []*nn.Parameter {
		return []*nn.Parameter{shaped(t, "a", tensor.Float32, 3), shaped(t, "b", tensor.Float32, 2)}
	}
	run := func(ps []*nn.Parameter, opt nn.Optimizer) []float32 {
		for s := range 3 {
			require.NoError(t, setGrads(ps, 0.1*float64(s+1)))
			if s == 1 {
				ps[1].SetRequiresGrad(false) // frozen, its gradient left over
			}
			require.NoError(t, opt.Step())
		}
		return flatParams(ps)
	}
	ref := mk()
	a := nn.NewAdamW(ref, 1e-2, 0)
	defer a.Release()
	want := run(ref, a)
	ps := mk()
	z, err := dist.NewZeroAdamW(dist.NewLocalGroup(1)[0], ps, 1e-2, 0)
	require.NoError(t, err)
	defer z.Release()
	got := run(ps, z)
	assert.True(t, equalBits(want, got), "ZeroAdamW %v, nn.AdamW %v", got, want)
}

// badSize is a Collective whose Size and Rank are what a broken
// implementation reports.
type badSize struct {
	dist.Collective
	size, rank int
}

func (b badSize) Size() int { return b.size }
func (b badSize) Rank() int { return b.rank }

// A Collective reporting no ranks, or a rank outside [0, Size), is
// refused by New and NewZeroAdamW with an error, not a division by zero
// or an index out of range.
func TestClientBadCollectiveSize(t *testing.T) {
	for _, c := range []struct{ size, rank int }{{0, 0}, {-1, 0}, {2, 2}, {2, -1}} {
		coll := badSize{Collective: dist.NewLocalGroup(1)[0], size: c.size, rank: c.rank}
		p := shaped(t, "w", tensor.Float32, 3)
		var err error
		assert.NotPanics(t, func() { _, err = dist.New(coll, []*nn.Parameter{p}, dist.Options{}) }, "%+v", c)
		assert.ErrorIs(t, err, tensor.ErrArgument, "New %+v", c)
		assert.NotPanics(t, func() { _, err = dist.NewZeroAdamW(coll, []*nn.Parameter{p}, 1e-3, 0) }, "%+v", c)
		assert.ErrorIs(t, err, tensor.ErrArgument, "NewZeroAdamW %+v", c)
	}
}

// A gradient whose shape is not its parameter's (a program's bug) is an
// error naming the parameter, from ZeroAdamW's Step (which used to read
// the first elements of a larger gradient, or a [2 2] one as [4],
// silently, where nn.AdamW refuses) and from SyncGradients; nothing is
// updated.
func TestClientWrongGradientShape(t *testing.T) {
	for _, gs := range [][]int{{5}, {2, 2}, {3}} {
		ps := []*nn.Parameter{shaped(t, "w", tensor.Float32, 4)}
		g, err := tensor.NewKept(tensor.CPU(), tensor.Float32, memory.RoleGradient, gs...)
		require.NoError(t, err)
		g.Fill(1)
		ps[0].Grad = g
		z, err := dist.NewZeroAdamW(dist.NewLocalGroup(1)[0], ps, 1e-3, 0)
		require.NoError(t, err)
		err = z.Step()
		require.ErrorIs(t, err, tensor.ErrShape, "gradient %v", gs)
		assert.ErrorContains(t, err, `parameter "w" has a gradient of shape`)
		assert.Equal(t, []float32{1, 1, 1, 1}, ps[0].Value.Float32s(), "gradient %v: updated", gs)
		assert.Zero(t, z.Steps())
		z.Release()
		for _, noOverlap := range []bool{false, true} {
			d, err := dist.New(dist.NewLocalGroup(1)[0], ps, dist.Options{NoOverlap: noOverlap})
			require.NoError(t, err)
			err = d.SyncGradients()
			require.ErrorIs(t, err, tensor.ErrShape, "gradient %v", gs)
			assert.ErrorContains(t, err, `parameter "w" has a gradient of shape`)
			d.Release()
		}
	}
}
