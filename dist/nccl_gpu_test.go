package dist_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/cuda"
	"github.com/strata-ml/strata/dist"
	"github.com/strata-ml/strata/nccl"
	"github.com/strata-ml/strata/nn"
	"github.com/strata-ml/strata/tensor"
)

// The NCCL Collective on real GPUs. Every test skips without the CUDA
// driver, a GPU or NCCL, and fails instead when STRATA_REQUIRE_GPU is
// set; the multi-GPU ones skip on a machine of one GPU (always: no
// variable turns that into a failure, since one-GPU machines run the
// rest).

// gpuDevices returns cuda:0 .. cuda:n-1 (n = 0: every GPU, at least 2),
// or skips.
func gpuDevices(t *testing.T, n int) []tensor.Device {
	t.Helper()
	missing := func(format string, args ...any) {
		t.Helper()
		if os.Getenv("STRATA_REQUIRE_GPU") != "" {
			t.Fatalf("STRATA_REQUIRE_GPU is set: "+format, args...)
		}
		t.Skipf(format, args...)
	}
	if _, err := tensor.CUDA(0); err != nil {
		missing("no CUDA device: %v", err)
	}
	if err := nccl.Init(); err != nil {
		missing("no NCCL: %v", err)
	}
	count, err := cuda.DeviceCount()
	require.NoError(t, err)
	if n == 0 {
		n = max(count, 2)
	}
	if count < n {
		t.Skipf("needs %d GPUs, this machine has %d", n, count)
	}
	devs := make([]tensor.Device, n)
	for i := range devs {
		devs[i], err = tensor.CUDA(i)
		require.NoError(t, err)
	}
	return devs
}

// runNCCL makes an NCCL group over devs and runs fn on one goroutine per
// rank, locked to its OS thread, each with its own Ctx; it returns the
// ranks' errors, failing the test when they do not return within timeout.
func runNCCL(t *testing.T, devs []tensor.Device, timeout time.Duration, fn func(c *tensor.Ctx, coll dist.Collective, dev tensor.Device) error) []error {
	t.Helper()
	g, err := dist.NewNCCLGroup(devs)
	require.NoError(t, err)
	require.Equal(t, len(devs), g.Size())
	errs := make([]error, len(devs))
	var wg sync.WaitGroup
	for r := range devs {
		wg.Go(func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			c := tensor.NewCtx()
			errs[r] = fn(c, g.Rank(r), devs[r])
			if errs[r] == nil {
				errs[r] = devs[r].Synchronize()
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(timeout):
		t.Fatalf("ranks did not return within %v (deadlock)", timeout)
	}
	assert.NoError(t, g.Close())
	return errs
}

// collectivesOn checks the three collectives on n = len(devs) ranks:
// rank r's tensor holds r+1+i*step (exact small values in every dtype),
// of 2·3·4·5·7·8 elements (divisible by every rank count up to 8).
func collectivesOn(t *testing.T, devs []tensor.Device, dt tensor.DType) {
	n := len(devs)
	const numel = 2 * 3 * 4 * 5 * 7 * 8
	vals := func(r int) []float64 {
		v := make([]float64, numel)
		for i := range v {
			v[i] = float64(r+1) + float64(i%16)
		}
		return v
	}
	sum := make([]float64, numel)
	for r := range n {
		for i, v := range vals(r) {
			sum[i] += v
		}
	}
	got := make([][3][]float64, n)
	errs := runNCCL(t, devs, 60*time.Second, func(c *tensor.Ctx, coll dist.Collective, dev tensor.Device) error {
		r := coll.Rank()
		return inScope(c, func() error {
			for k, call := range []func(*tensor.Tensor) error{coll.AllReduceSum, coll.ReduceScatterSum, coll.AllGather} {
				x := c.FromFloat64s(dev, vals(r), numel).To(dt)
				// queued behind the op that made it, read by the copy after it
				if err := call(x); err != nil {
					return err
				}
				got[r][k] = x.Float64s() // (no affine kernel for the half dtypes)
			}
			return nil
		})
	})
	for r, err := range errs {
		require.NoError(t, err, "rank %d", r)
	}
	k := numel / n
	for r := range n {
		assert.Equal(t, sum, got[r][0], "%v AllReduceSum on rank %d", dt, r)
		assert.Equal(t, sum[r*k:(r+1)*k], got[r][1][r*k:(r+1)*k], "%v ReduceScatterSum on rank %d: its chunk", dt, r)
		var gathered []float64
		for q := range n {
			gathered = append(gathered, vals(q)[q*k:(q+1)*k]...)
		}
		assert.Equal(t, gathered, got[r][2], "%v AllGather on rank %d", dt, r)
	}
}

// One rank on one GPU: each collective is the identity, which checks the
// whole path (device pointer, in-place offsets, the stream order) against
// the real library, in every dtype DataParallel's buckets can have.
func TestGPUNCCLCollectiveOneRank(t *testing.T) {
	devs := gpuDevices(t, 1)
	for _, dt := range []tensor.DType{tensor.Float32, tensor.Float64, tensor.Float16, tensor.BFloat16} {
		t.Run(dt.String(), func(t *testing.T) { collectivesOn(t, devs, dt) })
	}
}

// Every GPU of the machine (2 or more), one goroutine each.
func TestGPUNCCLCollectiveMulti(t *testing.T) {
	devs := gpuDevices(t, 0)
	for _, dt := range []tensor.DType{tensor.Float32, tensor.BFloat16} {
		t.Run(dt.String(), func(t *testing.T) { collectivesOn(t, devs, dt) })
	}
}

// A rank that aborts (its step failed) unblocks the others: no rank
// hangs, every one returns an error, and rank 0's (whose later calls find
// the group failed) wraps ErrAborted and the cause. On several GPUs a
// rank whose all-reduce was queued before the abort may instead see its
// wait fail (NCCL's kernel stopped by ncclCommAbort): any error will do
// there, as long as it returns.
func TestGPUNCCLAbort(t *testing.T) {
	devs := gpuDevices(t, 1)
	if all, err := cuda.DeviceCount(); err == nil && all >= 2 {
		devs = gpuDevices(t, all)
	}
	cause := fmt.Errorf("rank 0 failed on purpose")
	errs := runNCCL(t, devs, 60*time.Second, func(c *tensor.Ctx, coll dist.Collective, dev tensor.Device) error {
		return inScope(c, func() error {
			x := c.Full(dev, tensor.Float32, 1, 1024)
			if coll.Rank() == 0 {
				coll.Abort(cause)
			}
			for range 3 {
				if err := coll.AllReduceSum(x); err != nil {
					return err
				}
				_ = x.Float32s()
			}
			return nil
		})
	})
	require.ErrorIs(t, errs[0], dist.ErrAborted)
	require.ErrorIs(t, errs[0], cause)
	for r, err := range errs {
		require.Error(t, err, "rank %d", r)
		t.Logf("rank %d: %v", r, err)
	}
}

// DataParallel over NCCL trains the tiny GPT as one rank on the whole
// batch does: with one rank (the NCCL path of train-gpt -gpus 1) the same
// losses and parameters, and with every GPU of the machine (2 or more)
// within the CPU test's tolerances; ZeroAdamW too.
func TestGPUNCCLDataParallel(t *testing.T) {
	devs := gpuDevices(t, 1)
	T := tinyGPT.Context
	xs, ys := batches(ddpSteps, ddpB, T, tinyGPT.Vocab)
	// The reference on cuda:0, no collective.
	ref := newGPTOn(t, devs[0], 3)
	refOpt := nn.NewAdamW(ref.Parameters(), ddpLR, 0.1)
	defer refOpt.Release()
	c := tensor.NewCtx()
	var refLoss []float64
	var refParams [][]float32
	for s := range ddpSteps {
		l, err := stepOn(c, devs[0], ref, refOpt, nil, xs[s], ys[s], ddpB)
		require.NoError(t, err)
		refLoss = append(refLoss, l)
		refParams = append(refParams, flatParams(ref.Parameters()))
	}
	for _, n := range rankCounts() {
		for _, zero := range []bool{false, true} {
			t.Run(fmt.Sprintf("%d-zero-%v", n, zero), func(t *testing.T) {
				devs := gpuDevices(t, n)
				losses, params := trainNCCL(t, devs, ddpB/n, xs, ys, zero)
				for s := range ddpSteps {
					for r := 1; r < n; r++ {
						assert.Equal(t, losses[0][s], losses[r][s], "step %d: rank %d's mean loss", s, r)
						assert.True(t, equalBits(params[0][s], params[r][s]), "step %d: rank %d's parameters differ from rank 0's", s, r)
					}
					maxDiff := 0.0
					for i, v := range refParams[s] {
						maxDiff = max(maxDiff, math.Abs(float64(v)-float64(params[0][s][i])))
					}
					lossDiff := math.Abs(refLoss[s] - losses[0][s])
					t.Logf("step %d: loss %.7f (1 GPU without NCCL %.7f, |diff| %.2g), max |param diff| %.2g", s, losses[0][s], refLoss[s], lossDiff, maxDiff)
					assert.LessOrEqual(t, lossDiff, lossTol*refLoss[s], "step %d: loss", s)
					assert.LessOrEqual(t, maxDiff, paramTol, "step %d: parameters", s)
				}
			})
		}
	}
}

func newGPTOn(t *testing.T, dev tensor.Device, seed uint64) *nn.GPT {
	g, err := nn.NewGPT(tinyGPT, nn.Options{Device: dev, DType: tensor.Float32, Rng: rand.New(rand.NewPCG(seed, 1))})
	require.NoError(t, err)
	t.Cleanup(func() { nn.Release(g.Parameters()) })
	return g
}

// trainNCCL is trainRanks over an NCCL group on devs.
func trainNCCL(t *testing.T, devs []tensor.Device, b int, xs, ys [][]int32, zero bool) (losses [][]float64, params [][][]float32) {
	losses, params, _ = trainNCCLWith(t, devs, b, xs, ys, zero, dist.Options{BucketBytes: 12 << 10})
	return losses, params
}

// trainNCCLWith is trainNCCL with DataParallel's options; it also returns
// each rank's DataParallel.OverlappedBuckets after every step, minus the
// number of buckets (0: every bucket started during backward).
func trainNCCLWith(t *testing.T, devs []tensor.Device, b int, xs, ys [][]int32, zero bool, opts dist.Options) (losses [][]float64, params [][][]float32, notEarly [][]int) {
	notEarly = make([][]int, len(devs))
	n := len(devs)
	losses, params = make([][]float64, n), make([][][]float32, n)
	models := make([]*nn.GPT, n)
	for r := range n {
		models[r] = newGPTOn(t, devs[r], uint64(3+r)) // BroadcastParameters makes them rank 0's
	}
	errs := runNCCL(t, devs, 120*time.Second, func(c *tensor.Ctx, coll dist.Collective, dev tensor.Device) error {
		r := coll.Rank()
		return rankRun(c, coll, dev, models[r], opts, zero, b, xs, ys, func(_ int, d *dist.DataParallel, mean float64) error {
			losses[r] = append(losses[r], mean)
			notEarly[r] = append(notEarly[r], len(d.Buckets())-d.OverlappedBuckets())
			var ps []float32
			if err := tensor.Try(func() { ps = flatParams(models[r].Parameters()) }); err != nil {
				return err
			}
			params[r] = append(params[r], ps)
			return nil
		})
	})
	for r, err := range errs {
		require.NoError(t, err, "rank %d", r)
	}
	return losses, params, notEarly
}

// The overlapped path over NCCL (each bucket's all-reduce on the rank's
// communication stream, ordered by events, started during backward)
// gives the losses and parameters of the path without overlap (every
// all-reduce on the device's stream after backward) bit for bit, on one
// GPU and, where there are 2 or more, on every GPU; with overlap every
// bucket was started during backward, without none.
func TestGPUNCCLOverlap(t *testing.T) {
	gpuDevices(t, 1)
	T := tinyGPT.Context
	xs, ys := batches(ddpSteps, ddpB, T, tinyGPT.Vocab)
	for _, n := range rankCounts() {
		for _, zero := range []bool{false, true} {
			t.Run(fmt.Sprintf("%d-zero-%v", n, zero), func(t *testing.T) {
				devs := gpuDevices(t, n)
				opts := dist.Options{BucketBytes: 12 << 10}
				opts.NoOverlap = true
				wantLoss, wantParams, none := trainNCCLWith(t, devs, ddpB/n, xs, ys, zero, opts)
				opts.NoOverlap = false
				gotLoss, gotParams, notEarly := trainNCCLWith(t, devs, ddpB/n, xs, ys, zero, opts)
				for r := range n {
					assert.Equal(t, wantLoss[r], gotLoss[r], "rank %d's losses", r)
					for s := range ddpSteps {
						assert.True(t, equalBits(wantParams[r][s], gotParams[r][s]), "rank %d, step %d: parameters differ", r, s)
						assert.Zero(t, notEarly[r][s], "rank %d, step %d: buckets not started during backward", r, s)
						assert.Positive(t, none[r][s], "rank %d, step %d: NoOverlap started buckets during backward", r, s)
					}
					t.Logf("rank %d: losses %v with and without overlap: bit-identical %v", r, gotLoss[r], assert.ObjectsAreEqual(wantLoss[r], gotLoss[r]))
				}
			})
		}
	}
}

// rankCounts are the numbers of GPUs the data-parallel GPU tests train
// on: 1, and every GPU of the machine when there are 2 or more that
// divide the global batch.
func rankCounts() []int {
	counts := []int{1}
	if all, err := cuda.DeviceCount(); err == nil && all >= 2 && ddpB%all == 0 {
		counts = append(counts, all)
	}
	return counts
}
