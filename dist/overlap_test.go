package dist_test

import (
	"errors"
	"fmt"
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

// The overlapped path (the default) gives the losses and parameters of
// the one without (NoOverlap) bit for bit, on every rank and every step,
// for 2 and 4 ranks, with AdamW and ZeroAdamW: the buckets hold the same
// gradients (final when copied) and the local group sums them in rank
// order whenever it is called, so nothing is added in another order.
func TestOverlapMatchesNoOverlap(t *testing.T) {
	T := tinyGPT.Context
	xs, ys := batches(ddpSteps, ddpB, T, tinyGPT.Vocab)
	for _, n := range []int{2, 4} {
		for _, zero := range []bool{false, true} {
			t.Run(fmt.Sprintf("%d ranks zero1=%v", n, zero), func(t *testing.T) {
				var mu sync.Mutex
				calls := map[bool][]string{} // rank 0's collective calls, in order, by overlap
				rec := func(overlap bool) func(c dist.Collective) dist.Collective {
					return func(c dist.Collective) dist.Collective {
						if c.Rank() != 0 {
							return c
						}
						return &recorder{Collective: c, onCall: func(what string) {
							mu.Lock()
							calls[overlap] = append(calls[overlap], what)
							mu.Unlock()
						}}
					}
				}
				wantLoss, wantParams, _, errs := trainRanksWith(t, n, ddpB/n, xs, ys, zero, dist.Options{BucketBytes: 12 << 10, NoOverlap: true}, rec(false))
				for r, err := range errs {
					require.NoError(t, err, "without overlap, rank %d", r)
				}
				gotLoss, gotParams, nb, errs := trainRanksWith(t, n, ddpB/n, xs, ys, zero, dist.Options{BucketBytes: 12 << 10}, rec(true))
				for r, err := range errs {
					require.NoError(t, err, "with overlap, rank %d", r)
				}
				for r := range n {
					assert.Equal(t, wantLoss[r], gotLoss[r], "rank %d's losses", r)
					for s := range ddpSteps {
						assert.True(t, equalBits(wantParams[r][s], gotParams[r][s]), "rank %d, step %d: parameters differ", r, s)
					}
				}
				// The same collective calls in the same order (the
				// buckets', the presence counts', the loss's, ZeRO's).
				require.NotEmpty(t, calls[false])
				assert.Equal(t, calls[false], calls[true])
				assert.Greater(t, nb[0], 4)
			})
		}
	}
}

// With checkpointed blocks (every checkpointing level: a region's
// parameters are leaves of the graph it differentiates inside its own
// backward), the overlapped path still gives NoOverlap's losses and
// parameters bit for bit: no parameter is reported before its last
// contribution, nor twice (which SyncGradients would refuse), and every
// bucket is still started by the hooks.
func TestOverlapCheckpointed(t *testing.T) {
	const n = 2
	T := tinyGPT.Context
	xs, ys := batches(ddpSteps, ddpB, T, tinyGPT.Vocab)
	for _, ck := range nn.CheckpointLevels[1:] {
		t.Run(fmt.Sprintf("%v every %d", ck.Mode, ck.Every), func(t *testing.T) {
			set := func(g *nn.GPT) { g.Checkpoint = ck }
			wantLoss, wantParams, _, errs := trainRanksWith(t, n, ddpB/n, xs, ys, false, dist.Options{BucketBytes: 12 << 10, NoOverlap: true}, nil, set)
			for r, err := range errs {
				require.NoError(t, err, "without overlap, rank %d", r)
			}
			gotLoss, gotParams, _, errs := trainRanksWith(t, n, ddpB/n, xs, ys, false, dist.Options{BucketBytes: 12 << 10}, nil, set)
			for r, err := range errs {
				require.NoError(t, err, "with overlap, rank %d", r)
			}
			for r := range n {
				assert.Equal(t, wantLoss[r], gotLoss[r], "rank %d's losses", r)
				for s := range ddpSteps {
					assert.True(t, equalBits(wantParams[r][s], gotParams[r][s]), "rank %d, step %d: parameters differ", r, s)
				}
			}
		})
	}
}

// recorder is a Collective that reports each call (for tests) as it
// begins.
type recorder struct {
	dist.Collective
	onCall func(what string)
}

func (r *recorder) AllReduceSum(t *tensor.Tensor) error {
	r.onCall(fmt.Sprintf("AllReduceSum(%d)", t.Numel()))
	return r.Collective.AllReduceSum(t)
}

func (r *recorder) ReduceScatterSum(t *tensor.Tensor) error {
	r.onCall(fmt.Sprintf("ReduceScatterSum(%d)", t.Numel()))
	return r.Collective.ReduceScatterSum(t)
}

func (r *recorder) AllGather(t *tensor.Tensor) error {
	r.onCall(fmt.Sprintf("AllGather(%d)", t.Numel()))
	return r.Collective.AllGather(t)
}

// chain is a model of k parameters of 4 float32 each, y = sum(x·w1·w2
// ... ·wk), with gate applied to x first, so that gate's backward is the
// last thing backward runs; with 16-byte buckets every parameter is a
// bucket, wk's first.
func chain(t *testing.T, k int, rank int) []*nn.Parameter {
	var ps []*nn.Parameter
	for i := range k {
		v, err := tensor.NewKept(tensor.CPU(), tensor.Float32, memory.RoleParameter, 4)
		require.NoError(t, err)
		v.CopyFrom(tensor.FromFloat32s(tensor.CPU(), []float32{1 + 0.1*float32(i), 0.5, float32(rank + 1), -1}, 4))
		name := fmt.Sprintf("w%d", i+1)
		ps = append(ps, &nn.Parameter{Var: autograd.Param(v, name), Name: name})
	}
	t.Cleanup(func() { nn.Release(ps) })
	return ps
}

func chainLoss(c *tensor.Ctx, ps []*nn.Parameter, gate func()) *autograd.Var {
	x := autograd.Const(c.Full(tensor.CPU(), tensor.Float32, 2, 4))
	x.SetRequiresGrad(true) // so that the gate's backward runs
	h := autograd.Record("gate", x.Value.Alias(), []*autograd.Var{x}, func(g *tensor.Tensor) []*tensor.Tensor {
		gate()
		return []*tensor.Tensor{g.Alias()}
	})
	h.Value = c.Adopt(h.Value)
	for _, p := range ps {
		h = autograd.Mul(h, p.Var)
	}
	return autograd.Sum(h, false)
}

// The first bucket's all-reduce starts before backward ends: the gate,
// the last node backward runs, waits until rank's collective has been
// called (on the goroutine that reduces the buckets); without the
// overlap nothing is called before SyncGradients and the gate times out.
// The buckets are reduced in order, one call each, and the gradients are
// those of the path without overlap.
func TestOverlapStartsDuringBackward(t *testing.T) {
	const n, k = 2, 5
	for _, overlap := range []bool{true, false} {
		t.Run(fmt.Sprintf("overlap=%v", overlap), func(t *testing.T) {
			models := [][]*nn.Parameter{chain(t, k, 0), chain(t, k, 1)}
			var mu sync.Mutex
			calls := make([][]string, n)
			started := []chan struct{}{make(chan struct{}), make(chan struct{})}
			gateSaw := make([]bool, n)
			grads := make([][]float32, n)
			early := make([]int, n)
			errs := runRanks(t, n, 30*time.Second, func(c *tensor.Ctx, coll dist.Collective) error {
				r := coll.Rank()
				var once sync.Once
				rc := &recorder{Collective: coll, onCall: func(what string) {
					mu.Lock()
					calls[r] = append(calls[r], what)
					mu.Unlock()
					once.Do(func() { close(started[r]) })
				}}
				d, err := dist.New(rc, models[r], dist.Options{BucketBytes: 16, NoOverlap: !overlap})
				if err != nil {
					return err
				}
				defer d.Release()
				if len(d.Buckets()) != k || d.Buckets()[0].Params[0].Name != "w5" {
					return fmt.Errorf("buckets %v", d.Buckets())
				}
				wait := 2 * time.Second
				if overlap {
					wait = 20 * time.Second
				}
				return inScope(c, func() error {
					l := chainLoss(c, models[r], func() {
						select {
						case <-started[r]:
							gateSaw[r] = true
						case <-time.After(wait):
						}
					})
					if err := l.Backward(); err != nil {
						return err
					}
					if err := d.SyncGradients(); err != nil {
						return err
					}
					early[r] = d.OverlappedBuckets()
					for _, p := range models[r] {
						grads[r] = append(grads[r], p.Grad.Float32s()...)
						p.ZeroGrad()
					}
					return nil
				})
			})
			for r, err := range errs {
				require.NoError(t, err, "rank %d", r)
			}
			for r := range n {
				if overlap {
					assert.Equal(t, k, early[r], "rank %d: buckets started during backward", r)
				} else {
					assert.Zero(t, early[r])
				}
			}
			for r := range n {
				assert.Equal(t, overlap, gateSaw[r], "rank %d: an all-reduce had started before the end of backward", r)
				assert.Equal(t, []string{"AllReduceSum(4)", "AllReduceSum(4)", "AllReduceSum(4)", "AllReduceSum(4)", "AllReduceSum(4)", "AllReduceSum(15)"},
					calls[r], "rank %d: one call a bucket, then the presence counts (5) and the ranks' signatures (2·5)", r)
			}
			// The mean of the ranks' gradients, the same on both: checked
			// against the path without overlap by the other subtest's
			// values, here against a direct computation of one element:
			// d/dw5[0] of sum(2·w1..w5) = 2·Πw_{i≠5}[0], averaged over ranks
			// (their w[0] are equal).
			want := float32(2 * 1.0 * 1.1 * 1.2 * 1.3)
			for r := range n {
				assert.InDelta(t, want, grads[r][16], 1e-6, "rank %d: w5[0]'s mean gradient", r)
				assert.Equal(t, grads[0], grads[r], "rank %d", r)
			}
		})
	}
}

// Gradient accumulation: micro-batches' backward passes in NoSync, then
// the last one's, then SyncGradients give the gradients of the path
// without overlap bit for bit; a second backward pass outside NoSync,
// after buckets were started, is an error on every rank (not a silently
// wrong mean), and the group is aborted.
func TestOverlapAccumulation(t *testing.T) {
	const n, k = 2, 3
	run := func(opts dist.Options, noSync bool) ([][]float32, []error) {
		models := [][]*nn.Parameter{chain(t, k, 0), chain(t, k, 1)}
		grads := make([][]float32, n)
		errs := runRanks(t, n, 30*time.Second, func(c *tensor.Ctx, coll dist.Collective) error {
			r := coll.Rank()
			d, err := dist.New(coll, models[r], opts)
			if err != nil {
				return err
			}
			defer d.Release()
			return inScope(c, func() error {
				first := func() error { return chainLoss(c, models[r], func() {}).Backward() }
				if noSync {
					err = d.NoSync(first)
				} else {
					err = first()
				}
				if err != nil {
					return err
				}
				if err := chainLoss(c, models[r], func() {}).Backward(); err != nil {
					return err
				}
				if err := d.SyncGradients(); err != nil {
					return err
				}
				for _, p := range models[r] {
					grads[r] = append(grads[r], p.Grad.Float32s()...)
					p.ZeroGrad()
				}
				return nil
			})
		})
		return grads, errs
	}
	want, errs := run(dist.Options{BucketBytes: 16, NoOverlap: true}, false)
	for r, err := range errs {
		require.NoError(t, err, "without overlap, rank %d", r)
	}
	got, errs := run(dist.Options{BucketBytes: 16}, true)
	for r, err := range errs {
		require.NoError(t, err, "NoSync, rank %d", r)
		assert.True(t, equalBits(want[r], got[r]), "rank %d", r)
	}
	_, errs = run(dist.Options{BucketBytes: 16}, false)
	for r, err := range errs {
		require.Error(t, err, "rank %d", r)
		if !errors.Is(err, dist.ErrAborted) {
			assert.ErrorIs(t, err, tensor.ErrArgument, "rank %d", r)
			assert.ErrorContains(t, err, "second backward pass before SyncGradients")
			assert.ErrorContains(t, err, "NoSync")
		}
	}
}

// A micro-batch's backward pass in NoSync after a pass outside it (whose
// buckets were started) also changes gradients already sent: an error on
// every rank, not a mean silently missing that micro-batch.
func TestOverlapNoSyncAfterStart(t *testing.T) {
	const n, k = 2, 3
	errs := runRanks(t, n, 30*time.Second, func(c *tensor.Ctx, coll dist.Collective) error {
		ps := chain(t, k, coll.Rank())
		d, err := dist.New(coll, ps, dist.Options{BucketBytes: 16})
		if err != nil {
			return err
		}
		defer d.Release()
		return inScope(c, func() error {
			if err := chainLoss(c, ps, func() {}).Backward(); err != nil {
				return err
			}
			if err := d.NoSync(func() error { return chainLoss(c, ps, func() {}).Backward() }); err != nil {
				return err
			}
			return d.SyncGradients()
		})
	})
	for r, err := range errs {
		require.Error(t, err, "rank %d", r)
		if !errors.Is(err, dist.ErrAborted) {
			assert.ErrorContains(t, err, "changed after its bucket's all-reduce had started", "rank %d", r)
		}
	}
}

// A parameter given to two DataParallels with the overlap is refused
// (one gradient hook a parameter); Release removes the hooks.
func TestOverlapHooks(t *testing.T) {
	ps := chain(t, 2, 0)
	coll := dist.NewLocalGroup(1)[0]
	d, err := dist.New(coll, ps, dist.Options{})
	require.NoError(t, err)
	for _, p := range ps {
		assert.True(t, p.HasGradHook())
	}
	_, err = dist.New(coll, ps, dist.Options{})
	require.ErrorIs(t, err, tensor.ErrArgument)
	assert.ErrorContains(t, err, `parameter "w2" has a gradient hook already`)
	d2, err := dist.New(coll, ps, dist.Options{NoOverlap: true})
	require.NoError(t, err, "without overlap: no hook")
	d2.Release()
	d.Release()
	for _, p := range ps {
		assert.False(t, p.HasGradHook())
	}
	d, err = dist.New(coll, ps, dist.Options{})
	require.NoError(t, err, "after Release")
	d.Release()
}

// Releasing the DataParallel inside NoSync (fn's error path, say) is
// not a nil dereference when NoSync restores its flag.
func TestOverlapReleaseInsideNoSync(t *testing.T) {
	ps := chain(t, 2, 0)
	d, err := dist.New(dist.NewLocalGroup(1)[0], ps, dist.Options{})
	require.NoError(t, err)
	bad := errors.New("micro-batch failed")
	var got error
	require.NotPanics(t, func() {
		got = d.NoSync(func() error { d.Release(); return bad })
	})
	assert.Equal(t, bad, got)
}

// A parameter that is not a leaf (an op's result) cannot take a
// gradient hook: New says so, naming it, instead of SetGradHook's panic,
// and leaves no hook on the parameters before it.
func TestOverlapNewRefusesANonLeaf(t *testing.T) {
	a := chain(t, 1, 0)[0]
	c := tensor.NewCtx()
	c.WithScope(func() {
		sq := &nn.Parameter{Var: autograd.Mul(a.Var, a.Var), Name: "sq"}
		var err error
		require.NotPanics(t, func() {
			_, err = dist.New(dist.NewLocalGroup(1)[0], []*nn.Parameter{sq, a}, dist.Options{BucketBytes: 1}) // a's bucket first
		})
		require.ErrorIs(t, err, tensor.ErrArgument)
		assert.ErrorContains(t, err, `parameter "sq" is not a leaf`)
		assert.False(t, a.HasGradHook(), "a's hook removed")
	})
}
