package autograd_test

import (
	"math/rand/v2"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/amp"
	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/tensor"
)

// leaf wraps t as a Var: trainable (its gradient released by done) or
// constant.
func leaf(t *tensor.Tensor, grad bool) *autograd.Var {
	if grad {
		v := autograd.Param(t.Alias(), "x")
		return v
	}
	return autograd.Const(t)
}

// done releases a trainable leaf's gradient and its alias of the value.
func done(vs ...*autograd.Var) {
	for _, v := range vs {
		v.ZeroGrad()
		v.Value.Release()
	}
}

// TestLinearCrossEntropy compares the fused, chunked head with
// CrossEntropy(Linear(h, w)) in float64: the loss and both gradients, for
// chunks that divide the rows, that do not, of one row, and all at once,
// with an ignored target; and by finite differences.
func TestLinearCrossEntropy(t *testing.T) {
	t.Run("plain", testLinearCrossEntropy)
	t.Run("padded", func(t *testing.T) {
		defer autograd.PadHeadAlways()()
		require.Equal(t, 64, autograd.HeadPadding(tensor.CPU(), 11))
		testLinearCrossEntropy(t)
	})
	assert.Equal(t, 11, autograd.HeadPadding(tensor.CPU(), 11), "the CPU does not pad")
	assert.Equal(t, 50257, autograd.HeadPadding(tensor.CPU(), 50257))
}

func testLinearCrossEntropy(t *testing.T) {
	before := settledInUse()
	rng := rand.New(rand.NewPCG(7, 8))
	const B, T, C, V = 2, 5, 6, 11
	hv, wv := randn(rng, B, T, C), randn(rng, V, C)
	ids := make([]int32, B*T)
	for i := range ids {
		ids[i] = int32(rng.IntN(V))
	}
	ids[3] = autograd.IgnoreIndex
	tgt := tensor.FromInt32s(tensor.CPU(), ids, B, T)
	tensor.Keep(tgt)

	run := func(fused bool, chunk int) (loss float64, gh, gw []float64) {
		tensor.WithScope(func() {
			h, w := leaf(hv, true), leaf(wv, true)
			defer done(h, w)
			var l *autograd.Var
			if fused {
				l = autograd.LinearCrossEntropy(h, w, tgt, chunk)
			} else {
				logits := autograd.Linear(h, w, nil)
				l = autograd.CrossEntropy(autograd.Reshape(logits, B*T, V), tgt.Reshape(B*T))
			}
			require.NoError(t, l.Backward())
			loss = l.Item()
			gh, gw = h.Grad.Float64s(), w.Grad.Float64s()
			done(h, w)
		})
		return
	}
	wantL, wantH, wantW := run(false, 0)
	for _, chunk := range []int{0, 1, 3, 5, 10, 64} {
		l, gh, gw := run(true, chunk)
		assert.InDelta(t, wantL, l, 1e-12, "chunk %d", chunk)
		assert.InDeltaSlice(t, wantH, gh, 1e-12, "chunk %d: dh", chunk)
		assert.InDeltaSlice(t, wantW, gw, 1e-12, "chunk %d: dw", chunk)
	}
	require.NoError(t, autograd.GradCheck(func(x []*autograd.Var) *autograd.Var {
		return autograd.LinearCrossEntropy(x[0], x[1], tgt, 3)
	}, []*tensor.Tensor{hv, wv}, nil, 1e-6, 1e-6, 1e-6))

	// Without gradients: the loss only, nothing kept.
	tensor.WithScope(func() {
		var l *autograd.Var
		h, w := leaf(hv, true), leaf(wv, true)
		autograd.NoGrad(func() { l = autograd.LinearCrossEntropy(h, w, tgt, 4) })
		assert.False(t, l.RequiresGrad())
		assert.InDelta(t, wantL, l.Item(), 1e-12)
		done(h, w)
	})
	// Only w trainable (a frozen trunk): dh is never made.
	tensor.WithScope(func() {
		w := leaf(wv, true)
		l := autograd.LinearCrossEntropy(leaf(hv, false), w, tgt, 4)
		require.NoError(t, l.Backward())
		assert.InDeltaSlice(t, wantW, w.Grad.Float64s(), 1e-12)
		done(w)
	})
	for _, x := range []*tensor.Tensor{hv, wv, tgt} {
		x.Release()
	}
	assert.Equal(t, before, tensor.CPU().Memory().InUse(), "nothing leaked")
}

func TestLinearCrossEntropyErrors(t *testing.T) {
	tensor.WithScope(func() {
		h := autograd.Const(tensor.Zeros(tensor.CPU(), tensor.Float32, 4, 3))
		w := autograd.Const(tensor.Zeros(tensor.CPU(), tensor.Float32, 5, 2))
		tgt := tensor.FromInt32s(tensor.CPU(), []int32{0, 1, 2, 3}, 4)
		err := tensor.Try(func() { autograd.LinearCrossEntropy(h, w, tgt, 0) })
		require.ErrorIs(t, err, tensor.ErrShape)
		w2 := autograd.Const(tensor.Zeros(tensor.CPU(), tensor.Float32, 5, 3))
		err = tensor.Try(func() { autograd.LinearCrossEntropy(h, w2, tgt.Narrow(0, 0, 3), 0) })
		require.ErrorIs(t, err, tensor.ErrShape)
		err = tensor.Try(func() { autograd.LinearCrossEntropy(h, w2, tgt, -1) })
		require.ErrorIs(t, err, tensor.ErrArgument)
		bad := tensor.FromInt32s(tensor.CPU(), []int32{0, 1, 9, 3}, 4)
		err = tensor.Try(func() { autograd.LinearCrossEntropy(h, w2, bad, 2) })
		require.ErrorIs(t, err, tensor.ErrArgument, "a target past the vocabulary")
	})
}

// TestLinearCrossEntropyAutocast: under a bfloat16 region the fused head
// matches the unfused one run in the same region (same casts, float32
// logits).
func TestLinearCrossEntropyAutocast(t *testing.T) {
	t.Run("plain", testLinearCrossEntropyAutocast)
	t.Run("padded", func(t *testing.T) {
		defer autograd.PadHeadAlways()()
		testLinearCrossEntropyAutocast(t)
	})
}

func testLinearCrossEntropyAutocast(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	const N, C, V = 12, 16, 40
	hv := tensor.RandN(tensor.CPU(), tensor.Float32, rng, 1, N, C)
	wv := tensor.RandN(tensor.CPU(), tensor.Float32, rng, 0.5, V, C)
	ids := make([]int32, N)
	for i := range ids {
		ids[i] = int32(rng.IntN(V))
	}
	tgt := tensor.FromInt32s(tensor.CPU(), ids, N)
	run := func(fused bool) (float64, []float32, []float32) {
		var loss float64
		var gh, gw []float32
		c := tensor.NewCtx()
		c.WithScope(func() {
			h, w := leaf(hv, true), leaf(wv, true)
			defer done(h, w)
			var l *autograd.Var
			amp.Autocast(c, tensor.BFloat16, func() {
				if fused {
					l = autograd.LinearCrossEntropy(h, w, tgt, 5)
				} else {
					l = autograd.CrossEntropy(autograd.Linear(h, w, nil), tgt)
				}
			})
			c.Adopt(l.Value) // made from kept tensors alone: no scope owns it otherwise
			require.NoError(t, l.Backward())
			loss, gh, gw = l.Item(), h.Grad.Float32s(), w.Grad.Float32s()
		})
		return loss, gh, gw
	}
	l0, h0, w0 := run(false)
	l1, h1, w1 := run(true)
	assert.InDelta(t, l0, l1, 1e-6)
	for i := range h0 {
		assert.InDelta(t, h0[i], h1[i], 2e-3, "dh[%d]", i)
	}
	for i := range w0 {
		assert.InDelta(t, w0[i], w1[i], 2e-3, "dw[%d]", i)
	}
	for _, x := range []*tensor.Tensor{hv, wv, tgt} {
		x.Release()
	}
}

// TestGPULinearCrossEntropy: on cuda:0 the fused head gives the unfused
// loss and gradients in float64 (the CUDA kernels, chunked), and in a
// bfloat16 region the same within rounding.
func TestGPULinearCrossEntropy(t *testing.T) {
	dev, err := tensor.CUDA(0)
	if err != nil {
		if os.Getenv("STRATA_REQUIRE_GPU") != "" {
			t.Fatalf("STRATA_REQUIRE_GPU is set, but cuda:0 is unavailable: %v", err)
		}
		t.Skipf("no CUDA device: %v", err)
	}
	rng := rand.New(rand.NewPCG(13, 14))
	const N, C = 300, 64
	for _, V := range []int{1000, 1001} { // 1001: the padded head (1024-wide logits)
		testGPULinearCrossEntropy(t, dev, rng, N, C, V)
	}
}

func testGPULinearCrossEntropy(t *testing.T, dev tensor.Device, rng *rand.Rand, N, C, V int) {
	if V%8 != 0 {
		require.Equal(t, 1024, autograd.HeadPadding(dev, V))
	}
	for _, dt := range []tensor.DType{tensor.Float64, tensor.Float32} {
		hv := tensor.RandN(dev, dt, rng, 1, N, C)
		wv := tensor.RandN(dev, dt, rng, 0.1, V, C)
		ids := make([]int32, N)
		for i := range ids {
			ids[i] = int32(rng.IntN(V))
		}
		ids[7] = autograd.IgnoreIndex
		tgt := tensor.FromInt32s(dev, ids, N)
		tensor.Keep(hv, wv, tgt)
		run := func(fused bool, region bool) (float64, []float64, []float64) {
			var loss float64
			var gh, gw []float64
			c := tensor.NewCtx()
			c.WithScope(func() {
				h, w := leaf(hv, true), leaf(wv, true)
				defer done(h, w)
				var l *autograd.Var
				f := func() {
					if fused {
						l = autograd.LinearCrossEntropy(h, w, tgt, 128)
					} else {
						l = autograd.CrossEntropy(autograd.Linear(h, w, nil), tgt)
					}
				}
				if region {
					amp.Autocast(c, tensor.BFloat16, f)
				} else {
					f()
				}
				require.NoError(t, l.Backward())
				loss, gh, gw = l.Item(), h.Grad.Float64s(), w.Grad.Float64s()
				l.Value.Release() // an orphan: every input is a kept tensor
			})
			assert.Zero(t, c.BytesInUse(), "the step's context holds nothing after its scope")
			return loss, gh, gw
		}
		tol := 1e-12
		if dt == tensor.Float32 {
			tol = 1e-5
		}
		for _, region := range []bool{false, dt == tensor.Float32} {
			if region {
				tol = 1e-3
			}
			l0, h0, w0 := run(false, region)
			l1, h1, w1 := run(true, region)
			assert.InDelta(t, l0, l1, tol, "V %d %v region %v: loss", V, dt, region)
			assert.InDeltaSlice(t, h0, h1, tol, "V %d %v region %v: dh", V, dt, region)
			assert.InDeltaSlice(t, w0, w1, tol, "V %d %v region %v: dw", V, dt, region)
		}
		for _, x := range []*tensor.Tensor{hv, wv, tgt} {
			x.Release()
		}
	}
}
