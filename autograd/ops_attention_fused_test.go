package autograd_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/tensor"
)

// The fused attention against the plain one (CausalAttention): the same
// function, the same dropout mask, computed without the (B, H, T, T)
// probabilities. attentionCases is shared by the CPU tests here and the
// GPU tests (ops_attention_fused_gpu_test.go).

type attentionCase struct {
	B, H, T, hd int
	p           float64
}

func (c attentionCase) String() string {
	return fmt.Sprintf("B%d_H%d_T%d_hd%d_p%g", c.B, c.H, c.T, c.hd, c.p)
}

// attentionCases: every head dimension the CUDA kernels are built for
// (and one between), lengths that are not multiples of any tile, one row,
// with and without dropout.
func attentionCases() []attentionCase {
	var cs []attentionCase
	for _, hd := range []int{16, 32, 48, 64, 128} {
		for _, T := range []int{1, 37, 70} {
			for _, p := range []float64{0, 0.2} {
				cs = append(cs, attentionCase{2, 3, T, hd, p})
			}
		}
	}
	return cs
}

const (
	attnSeed   = 0x5eed
	attnOffset = 12345 // not a multiple of 4: the Philox blocks straddle rows
)

func plainAttention(p float64) func(x []*autograd.Var) *autograd.Var {
	return func(x []*autograd.Var) *autograd.Var {
		return autograd.CausalAttention(x[0], x[1], x[2], p, attnSeed, attnOffset)
	}
}

func fusedAttention(p float64) func(x []*autograd.Var) *autograd.Var {
	return func(x []*autograd.Var) *autograd.Var {
		return autograd.FusedCausalAttention(x[0], x[1], x[2], p, attnSeed, attnOffset)
	}
}

// attentionInputs returns q, k, v and the output weights r of a case on
// dev in float32, from the case's own seed.
func attentionInputs(c *tensor.Ctx, dev tensor.Device, tc attentionCase) (xs []*tensor.Tensor, r *tensor.Tensor) {
	rng := rand.New(rand.NewPCG(uint64(tc.T*1000+tc.hd), uint64(tc.p*100)))
	for range 3 {
		xs = append(xs, c.RandN(dev, tensor.Float32, rng, 1, tc.B, tc.H, tc.T, tc.hd))
	}
	return xs, c.RandN(dev, tensor.Float32, rng, 1, tc.B, tc.H, tc.T, tc.hd)
}

// TestFusedCausalAttentionMatchesPlain: in float32 on the CPU the fused
// op's output and its three gradients equal the plain op's up to float32
// rounding (the order of the additions differs: the plain path's GEMMs
// against the fused tiles), with and without dropout.
func TestFusedCausalAttentionMatchesPlain(t *testing.T) {
	for _, tc := range attentionCases() {
		t.Run(tc.String(), func(t *testing.T) {
			c := tensor.NewCtx()
			c.WithScope(func() {
				xs, r := attentionInputs(c, tensor.CPU(), tc)
				py, pg := runOp(t, c, plainAttention(tc.p), xs, r, nil)
				fy, fg := runOp(t, c, fusedAttention(tc.p), xs, r, nil)
				require.Less(t, relErr(fy, py), 2e-6, "output")
				for i := range pg {
					require.Less(t, relErr(fg[i], pg[i]), 1e-5, "gradient of %s", "qkv"[i:i+1])
				}
			})
			require.Zero(t, c.BytesInUse())
		})
	}
}

// TestFusedCausalAttentionGradCheck: finite differences in float64, with
// and without dropout, and the float64 op against the plain float64 op.
func TestFusedCausalAttentionGradCheck(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, tc := range []attentionCase{{1, 2, 5, 3, 0}, {2, 1, 7, 4, 0.25}, {1, 1, 35, 2, 0.5}} {
		t.Run(tc.String(), func(t *testing.T) {
			in := []*tensor.Tensor{randn(rng, tc.B, tc.H, tc.T, tc.hd), randn(rng, tc.B, tc.H, tc.T, tc.hd), randn(rng, tc.B, tc.H, tc.T, tc.hd)}
			defer release(in)
			require.NoError(t, autograd.GradCheck(fusedAttention(tc.p), in, nil, 1e-6, 1e-6, 1e-6))
			c := tensor.NewCtx()
			c.WithScope(func() {
				r := c.RandN(tensor.CPU(), tensor.Float64, rng, 1, tc.B, tc.H, tc.T, tc.hd)
				py, pg := run64(t, c, plainAttention(tc.p), in, r)
				fy, fg := run64(t, c, fusedAttention(tc.p), in, r)
				require.Less(t, relErr(fy, py), 1e-13, "output")
				for i := range pg {
					require.Less(t, relErr(fg[i], pg[i]), 1e-12, "gradient %d", i)
				}
			})
		})
	}
}

func release(ts []*tensor.Tensor) {
	for _, x := range ts {
		x.Release()
	}
}

// run64 is runOp in float64.
func run64(t *testing.T, c *tensor.Ctx, f func([]*autograd.Var) *autograd.Var, xs []*tensor.Tensor, r *tensor.Tensor) (y []float64, grads [][]float64) {
	vars := make([]*autograd.Var, len(xs))
	for i, x := range xs {
		vars[i] = autograd.Const(c.Adopt(x.Clone()))
		vars[i].SetRequiresGrad(true)
	}
	out := f(vars)
	y = out.Value.Float64s()
	require.NoError(t, autograd.Sum(autograd.Mul(out, autograd.Const(r)), false).Backward())
	for _, v := range vars {
		grads = append(grads, v.Grad.Float64s())
		v.ZeroGrad()
		v.Value.Release()
	}
	return y, grads
}

// TestFusedCausalAttentionActivationBytes: after the forward pass the
// fused op holds its output and the (B, H, T) log-sum-exp, nothing else
// (its inputs are the caller's), and its forward peak is that too; the
// plain op's forward peak holds (B, H, T, T) scores and probabilities.
func TestFusedCausalAttentionActivationBytes(t *testing.T) {
	testAttentionActivationBytes(t, tensor.CPU())
}

func testAttentionActivationBytes(t *testing.T, dev tensor.Device) {
	const B, H, T, hd = 2, 3, 67, 32
	mem := dev.Memory()
	act := func() memory.Stat { return mem.Stats().Roles[memory.RoleActivation].Requested }
	for _, fused := range []bool{true, false} {
		c := tensor.NewCtx()
		c.WithScope(func() {
			xs, r := attentionInputs(c, dev, attentionCase{B, H, T, hd, 0.1})
			vars := make([]*autograd.Var, 3)
			for i, x := range xs {
				vars[i] = autograd.Const(x)
				vars[i].SetRequiresGrad(true)
			}
			mem.ResetPeaks()
			base := act().Current
			var y *autograd.Var
			if fused {
				y = fusedAttention(0.1)(vars)
			} else {
				y = plainAttention(0.1)(vars)
			}
			held, peak := act().Current-base, act().Peak-base
			out, lse := int64(B*H*T*hd*4), int64(B*H*T*4)
			if fused {
				require.Equal(t, out+lse, held, "fused: output and log-sum-exp held")
				require.Equal(t, out+lse, peak, "fused: forward peak")
			} else {
				require.Equal(t, out, held, "plain: output held")
				require.GreaterOrEqual(t, peak, int64(2*B*H*T*T*4), "plain: forward peak holds scores and probabilities")
			}
			require.NoError(t, autograd.Sum(autograd.Mul(y, autograd.Const(r)), false).Backward())
			for _, v := range vars {
				v.ZeroGrad()
			}
		})
		require.Zero(t, c.BytesInUse())
	}
}

// relErr is maxRel with a floor on the scale, for gradients that are
// exactly zero in exact arithmetic (q and k of a single row) and so
// only rounding noise in float32: errors are relative to at least 1.
func relErr(a, b []float64) float64 {
	var num, den float64
	for i := range a {
		num = max(num, math.Abs(a[i]-b[i]))
		den = max(den, math.Abs(b[i]))
	}
	return num / max(den, 1)
}
