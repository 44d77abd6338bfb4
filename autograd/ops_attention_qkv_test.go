package autograd_test

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/amp"
	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/tensor"
)

// splitAttention is FusedCausalAttention over heads split from qkv
// (B, T, 3C) by hand and merged back: the path nn's attention took before
// FusedCausalAttentionQKV.
func splitAttention(heads int, p float64) func(x []*autograd.Var) *autograd.Var {
	return func(x []*autograd.Var) *autograd.Var {
		s := x[0].Value.Shape()
		B, T, C := s[0], s[1], s[2]/3
		hd := C / heads
		h5 := autograd.Contiguous(autograd.Permute(autograd.Reshape(x[0], B, T, 3, heads, hd), 2, 0, 3, 1, 4))
		piece := func(i int) *autograd.Var { return autograd.Reshape(autograd.Narrow(h5, 0, i, 1), B, heads, T, hd) }
		y := autograd.FusedCausalAttention(piece(0), piece(1), piece(2), p, attnSeed, attnOffset)
		return autograd.Reshape(autograd.Contiguous(autograd.Permute(y, 0, 2, 1, 3)), B, T, C)
	}
}

func qkvAttention(heads int, p float64) func(x []*autograd.Var) *autograd.Var {
	return func(x []*autograd.Var) *autograd.Var {
		return autograd.FusedCausalAttentionQKV(x[0], heads, p, attnSeed, attnOffset)
	}
}

// FusedCausalAttentionQKV gives the split path's output and gradient: in
// float32 exactly (the same kernels on the same numbers), under autocast
// to bfloat16 up to the rounding of the half copies (one cast of qkv
// against three of the heads: the same values).
func TestFusedCausalAttentionQKVMatchesSplit(t *testing.T) { testQKVMatchesSplit(t, tensor.CPU()) }

// TestFusedCausalAttentionQKVMatchesSplitGPU: the same on CUDA, where under
// autocast the tensor-core kernels read the heads of qkv in place and
// write y and its gradient token-major; the arithmetic is that of the
// split heads, so the results agree to rounding (in float32 the op takes
// the split path's own copies).
func TestFusedCausalAttentionQKVMatchesSplitGPU(t *testing.T) { testQKVMatchesSplit(t, attnGPU(t)) }

func testQKVMatchesSplit(t *testing.T, dev tensor.Device) {
	for _, tc := range []attentionCase{{2, 3, 37, 16, 0}, {2, 3, 37, 16, 0.2}, {1, 2, 70, 32, 0.1}, {2, 2, 1, 8, 0}} {
		for _, dt := range []*tensor.DType{nil, ptr(tensor.BFloat16), ptr(tensor.Float16)} {
			name := tc.String()
			if dt != nil {
				name += "_autocast_" + dt.String()
			}
			t.Run(name, func(t *testing.T) {
				c := tensor.NewCtx()
				c.WithScope(func() {
					rng := rand.New(rand.NewPCG(uint64(tc.T), uint64(tc.hd)))
					C := tc.H * tc.hd
					qkv := c.RandN(dev, tensor.Float32, rng, 1, tc.B, tc.T, 3*C)
					r := c.RandN(dev, tensor.Float32, rng, 1, tc.B, tc.T, C)
					sy, sg := runOp(t, c, splitAttention(tc.H, tc.p), []*tensor.Tensor{qkv}, r, dt)
					qy, qg := runOp(t, c, qkvAttention(tc.H, tc.p), []*tensor.Tensor{qkv}, r, dt)
					tol := 0.0
					if dt != nil {
						tol = 1e-6
					}
					require.LessOrEqual(t, relErr(qy, sy), tol, "output")
					require.LessOrEqual(t, relErr(qg[0], sg[0]), tol, "gradient")
				})
				require.Zero(t, c.BytesInUse())
			})
		}
	}
}

func ptr[T any](v T) *T { return &v }

// Finite differences in float64, with and without dropout.
func TestFusedCausalAttentionQKVGradCheck(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, tc := range []attentionCase{{1, 2, 5, 3, 0}, {2, 1, 7, 4, 0.25}} {
		t.Run(tc.String(), func(t *testing.T) {
			x := randn(rng, tc.B, tc.T, 3*tc.H*tc.hd)
			tensor.Keep(x)
			defer x.Release()
			require.NoError(t, autograd.GradCheck(qkvAttention(tc.H, tc.p), []*tensor.Tensor{x}, nil, 1e-6, 1e-7, 1e-6))
		})
	}
}

// A caller may drop qkv (nn's attention does: nothing else reads the
// product): the op keeps what its backward needs, in float32 and under
// autocast.
func TestFusedCausalAttentionQKVInputDropped(t *testing.T) {
	for _, dt := range []*tensor.DType{nil, ptr(tensor.BFloat16)} {
		c := tensor.NewCtx()
		c.WithScope(func() {
			rng := rand.New(rand.NewPCG(9, 10))
			w := autograd.Const(c.RandN(tensor.CPU(), tensor.Float32, rng, 1, 12, 12))
			w.SetRequiresGrad(true)
			x := autograd.Const(c.RandN(tensor.CPU(), tensor.Float32, rng, 1, 2, 5, 12))
			var loss *autograd.Var
			body := func() {
				qkv := autograd.Linear(x, w, nil)
				y := autograd.FusedCausalAttentionQKV(qkv, 2, 0, 0, 0)
				qkv.Drop()
				loss = autograd.Sum(y, false)
			}
			if dt != nil {
				amp.Autocast(c, *dt, body)
			} else {
				body()
			}
			require.NoError(t, loss.Backward())
			require.NotNil(t, w.Grad)
			w.ZeroGrad()
		})
		require.Zero(t, c.BytesInUse())
	}
}
