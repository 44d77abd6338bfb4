package main

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/cuda"
	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/memory/memtest"
	"github.com/strata-ml/strata/nn"
	"github.com/strata-ml/strata/tensor"
)

// Fault injection over a training step of the small GPT: every allocation
// point fails once, and each failure must come back as an error naming
// the op, leave the bytes in use where they were before the step, change
// no weight, and let the next step succeed.

// faultTrainer is a trainer of the tiny preset's depth (2 blocks: every
// op of the real one) at a small width, on dev.
func faultTrainer(t *testing.T, dev tensor.Device, flags ...string) *trainer {
	return faultTrainerCfg(t, dev, nn.GPTConfig{Vocab: 32, Context: 12, Layers: 2, Heads: 2, Width: 16, Dropout: 0.1}, 4, flags...)
}

// faultTrainerCfg is faultTrainer for a model of shape cfg and B rows of
// cfg.Context tokens.
func faultTrainerCfg(t *testing.T, dev tensor.Device, cfg nn.GPTConfig, B int, flags ...string) *trainer {
	o, err := parseFlags(append([]string{"-batch", fmt.Sprint(B), "-steps", "100", "-dropout", "0.1"}, flags...))
	require.NoError(t, err)
	tr, err := newTrainer(o, cfg, dev, cfg.Context)
	require.NoError(t, err)
	t.Cleanup(tr.release)
	data := randomData{vocab: cfg.Vocab}
	data.batch(rand.New(rand.NewPCG(1, 1)), tr.xs, tr.ys, tr.B, tr.T)
	return tr
}

// weights copies every parameter's values.
func weights(tr *trainer) [][]float32 {
	var w [][]float32
	for _, p := range tr.params {
		w = append(w, p.Value.Float32s())
	}
	return w
}

// sweepResult counts what a sweep saw.
type sweepResult struct {
	points, failed, recovered int
	ops                       map[string]int
}

func (r sweepResult) String() string {
	ops := make([]string, 0, len(r.ops))
	for op, n := range r.ops {
		ops = append(ops, fmt.Sprintf("%s:%d", op, n))
	}
	slices.Sort(ops)
	return fmt.Sprintf("%d allocation points, %d failed steps, %d recovered by the pool; failing ops %v", r.points, r.failed, r.recovered, ops)
}

// checkFailedStep checks one injected failure: the step's error names an
// op and wraps out of memory, the bytes in use are back where they were,
// no weight changed, and the next step succeeds, leaving afterNext bytes
// in use (inUse, but for the moments a first optimizer step allocates).
func checkFailedStep(t *testing.T, tr *trainer, it int, err error, inUse, ctxBytes, afterNext int64, before [][]float32, r *sweepResult, what string) {
	t.Helper()
	require.ErrorIs(t, err, memory.ErrOutOfMemory, what)
	var oe *tensor.OpError
	require.True(t, errors.As(err, &oe), "%s: %v", what, err)
	require.NotEmpty(t, oe.Op, what)
	r.ops[oe.Op]++
	r.failed++
	require.Equal(t, inUse, tr.dev.Memory().InUse(), "%s: bytes in use after the failed step", what)
	require.Equal(t, ctxBytes, tr.c.BytesInUse(), what)
	require.Equal(t, before, weights(tr), "%s: a failed step changes no weight", what)
	_, err = tr.step(it)
	require.NoError(t, err, "%s: the next step", what)
	require.Equal(t, afterNext, tr.dev.Memory().InUse(), "%s: bytes in use after the next step", what)
}

// TestFaultEveryAllocation fails each allocation of a training step in
// turn (Manager.FailAllocation: cached or not), in float32 and in fp16
// with the gradient scaler, with dropout, plain and with checkpointed
// blocks (the recomputation allocates too).
func TestFaultEveryAllocation(t *testing.T) {
	for _, flags := range [][]string{{}, {"-precision", "fp16"}, {"-checkpoint", "blocks"}, {"-checkpoint", "selective"}, {"-attention", "fused", "-precision", "bf16"}} {
		t.Run(fmt.Sprint(flags), func(t *testing.T) {
			m := memory.NewHostManager(memory.Config{})
			dev := tensor.NewCPUDevice(m)
			tr := faultTrainer(t, dev, flags...)
			it := 0
			for ; it < 2; it++ { // optimizer moments and caches in place
				_, err := tr.step(it)
				require.NoError(t, err)
			}
			allocs := func() (n int64) {
				st := m.Stats()
				for _, r := range st.Roles {
					n += r.Allocs
				}
				return n
			}
			a0 := allocs()
			_, err := tr.step(it)
			require.NoError(t, err)
			it++
			r := sweepResult{points: int(allocs() - a0), ops: map[string]int{}}
			require.Greater(t, r.points, 50)
			for n := 1; n <= r.points; n++ {
				inUse, ctxBytes, before := m.InUse(), tr.c.BytesInUse(), weights(tr)
				m.FailAllocation(int64(n))
				_, err := tr.step(it)
				require.Equal(t, int64(1), m.FailAllocation(0), "allocation %d of %d was reached", n, r.points)
				checkFailedStep(t, tr, it+1, err, inUse, ctxBytes, inUse, before, &r, fmt.Sprintf("allocation %d of %d", n, r.points))
				it += 2
			}
			t.Logf("%v: %v", flags, r)
		})
	}
}

// TestFaultBackendAllocations fails the backend under the pool (a
// memtest.FaultBackend: one host backend, which every tier falls back to)
// at each of its allocations during the first step of a new model, when
// every activation, gradient and optimizer moment needs new memory: for
// good (the step fails after the pool released its cache and retried),
// and once (the pool's retry succeeds, and so does the step).
func TestFaultBackendAllocations(t *testing.T) {
	fresh := func() (*memtest.FaultBackend, *memory.Manager, *trainer) {
		fb := memtest.NewFaultBackend(memory.NewHostBackend(memory.TierHost), 0)
		m, err := memory.NewManager([]memory.Backend{fb}, memory.Config{})
		require.NoError(t, err)
		// The tiny preset as the default run trains it (128 rows of the
		// addition task's 12 tokens): activations large enough to need
		// segments of their own.
		cfg, _ := nn.LookupGPTConfig("tiny")
		cfg.Context, cfg.Dropout = 12, 0.1
		return fb, m, faultTrainerCfg(t, tensor.NewCPUDevice(m), cfg, 128)
	}
	fb, _, tr := fresh()
	c0, _ := fb.Calls()
	_, err := tr.step(0)
	require.NoError(t, err)
	c1, _ := fb.Calls()
	points := c1 - c0
	afterFirst := tr.dev.Memory().InUse()
	require.Greater(t, points, 3)
	r := sweepResult{points: points, ops: map[string]int{}}
	for n := 1; n <= points; n++ {
		for _, count := range []int{-1, 1} {
			fb, m, tr := fresh()
			inUse, ctxBytes, before := m.InUse(), tr.c.BytesInUse(), weights(tr)
			fb.FailAt(n, count)
			_, err := tr.step(0)
			fb.FailNext(0)
			what := fmt.Sprintf("backend allocation %d of %d, %d failures", n, points, count)
			if count == 1 && err == nil {
				r.recovered++
				continue
			}
			checkFailedStep(t, tr, 1, err, inUse, ctxBytes, afterFirst, before, &r, what)
			require.Equal(t, 1, tr.opt.Steps(), "%s: the failed step did not count", what)
		}
	}
	t.Logf("%v", r)
}

// TestFaultEveryAllocationGPU is TestFaultEveryAllocation on the GPU's
// manager (skipped without one).
func TestFaultEveryAllocationGPU(t *testing.T) {
	dev := gpuDevice(t)
	m := dev.Memory()
	settle()
	tr := faultTrainer(t, dev)
	it := 0
	for ; it < 2; it++ {
		_, err := tr.step(it)
		require.NoError(t, err)
	}
	allocs := func() (n int64) {
		for _, r := range m.Stats().Roles {
			n += r.Allocs
		}
		return n
	}
	a0 := allocs()
	_, err := tr.step(it)
	require.NoError(t, err)
	it++
	r := sweepResult{points: int(allocs() - a0), ops: map[string]int{}}
	for n := 1; n <= r.points; n++ {
		inUse, ctxBytes, before := m.InUse(), tr.c.BytesInUse(), weights(tr)
		m.FailAllocation(int64(n))
		_, err := tr.step(it)
		m.FailAllocation(0)
		checkFailedStep(t, tr, it+1, err, inUse, ctxBytes, inUse, before, &r, fmt.Sprintf("allocation %d of %d", n, r.points))
		it += 2
	}
	t.Logf("GPU: %v", r)
}

// TestCUDAErrorEveryCall injects a driver error into each driver and
// cuBLAS call of a training step on the GPU in turn (cuda.FailCall):
// launches, copies, memsets, GEMMs. Each comes back as an error naming the
// op, the bytes in use return, no weight changes, and the next step
// succeeds. Skipped without a GPU.
func TestCUDAErrorEveryCall(t *testing.T) {
	dev := gpuDevice(t)
	settle()
	tr := faultTrainer(t, dev)
	it := 0
	for ; it < 2; it++ {
		_, err := tr.step(it)
		require.NoError(t, err)
	}
	defer cuda.FailCall("", 0, 0)
	cuda.FailCall("", 1<<62, 0) // count the calls of one step
	_, err := tr.step(it)
	require.NoError(t, err)
	it++
	points, _ := cuda.FaultCalls()
	cuda.FailCall("", 0, 0)
	require.Positive(t, points)
	ops := map[string]int{}
	failed := 0
	for n := int64(1); n <= points; n++ {
		m := dev.Memory()
		inUse, before, roles := m.InUse(), weights(tr), inUseByRole(m)
		cuda.FailCall("", n, 719) // CUDA_ERROR_LAUNCH_FAILED, or CUBLAS_STATUS_EXECUTION_FAILED
		_, err := tr.step(it)
		_, hit := cuda.FaultCalls()
		cuda.FailCall("", 0, 0)
		what := fmt.Sprintf("driver call %d of %d", n, points)
		if hit == 0 {
			// The step made fewer calls this time (a cache hit): nothing
			// failed.
			require.NoError(t, err, what)
			it++
			continue
		}
		require.Error(t, err, what)
		var oe *tensor.OpError
		require.True(t, errors.As(err, &oe), "%s: %v", what, err)
		ops[oe.Op]++
		failed++
		require.Equal(t, inUse, m.InUse(), "%s, failing %s (%v): bytes in use by role %v before, %v after", what, oe.Op, err, roles, inUseByRole(m))
		if !slices.EqualFunc(before, weights(tr), slices.Equal) {
			// The failure hit the optimizer's update itself (AdamW is one
			// launch per parameter): the weights it updated stay updated.
			t.Logf("%s: failed inside the optimizer update (%s)", what, oe.Op)
		}
		_, err = tr.step(it + 1)
		require.NoError(t, err, "%s: the next step", what)
		it += 2
	}
	t.Logf("GPU driver calls: %d points, %d failed steps; failing ops %v", points, failed, ops)
	fmt.Fprintf(os.Stderr, "GPU driver-call sweep: %d points, %d failed steps, ops %v\n", points, failed, ops)
}

// inUseByRole is m's allocated bytes by role, for failure messages.
func inUseByRole(m *memory.Manager) map[string]int64 {
	st := m.Stats()
	out := map[string]int64{}
	for r := range memory.NumRoles {
		if n := st.Roles[r].Allocated.Current; n != 0 {
			out[memory.Role(r).String()] = n
		}
	}
	return out
}

// gpuDevice returns the first CUDA device, or skips the test without one
// (fails when STRATA_REQUIRE_GPU is set).
func gpuDevice(t *testing.T) tensor.Device {
	t.Helper()
	dev, err := tensor.CUDA(0)
	if err != nil {
		if os.Getenv("STRATA_REQUIRE_GPU") != "" {
			t.Fatalf("STRATA_REQUIRE_GPU is set: %v", err)
		}
		t.Skipf("no GPU: %v", err)
	}
	return dev
}

// settle lets the garbage collector's cleanups free what earlier tests
// left unreleased on the shared device, so that they do not move its
// bytes in use during a sweep.
func settle() {
	for range 3 {
		runtime.GC()
		time.Sleep(20 * time.Millisecond)
	}
}
