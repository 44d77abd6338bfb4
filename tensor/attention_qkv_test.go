package tensor_test

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/tensor"
)

// FusedCausalAttentionQKV and its backward on every device and input
// dtype give exactly what FusedCausalAttention gives over the heads split
// by hand (q, k, v side by side in qkv, head h at columns [h·hd,
// (h+1)·hd) of each): on CUDA the tensor-core kernels read the heads in
// place and write y and dqkv in the token-major layout, with the same
// arithmetic as over contiguous heads, so the results are bit for bit
// the same; with dropout, at a head size that fills its kernel (the
// cp.async path) and a padded one.
func TestFusedAttentionQKVMatchesSplitHeads(t *testing.T) {
	testQKVMatchesSplitHeads(t)
	t.Run("copies", func(t *testing.T) { // the comparison path, on CUDA too
		t.Setenv(tensor.EnvAttentionQKV, "copy")
		testQKVMatchesSplitHeads(t)
	})
}

func testQKVMatchesSplitHeads(t *testing.T) {
	onDevices(t, func(t *testing.T, dev tensor.Device) {
		for _, dt := range []tensor.DType{tensor.Float32, tensor.Float16, tensor.BFloat16, tensor.Float64} {
			if dt == tensor.Float64 && dev != tensor.CPU() {
				continue
			}
			for _, hd := range []int{40, 64} {
				tensor.WithScope(func() { checkQKV(t, dev, dt, hd) })
			}
		}
	})
}

func checkQKV(t *testing.T, dev tensor.Device, dt tensor.DType, hd int) {
	const B, H, T, p, seed, offset = 2, 3, 37, 0.1, 5, 9
	C := H * hd
	rng := rand.New(rand.NewPCG(uint64(hd), uint64(dt)))
	qkvv := tensor.RandN(tensor.CPU(), tensor.Float32, rng, 1, B, T, 3*C).To(dt).Float64s()
	acc := tensor.AccumDType(dt)
	dyv := tensor.RandN(tensor.CPU(), tensor.Float32, rng, 1, B, T, C).To(acc).Float64s()
	// The heads by hand: element (b, h, t, d) of group g (q, k, v) is
	// qkv[b, t, g·C + h·hd + d]; of y and dy, [b, t, h·hd + d].
	idx := func(g, b, h, tt, d, width int) int { return (b*T+tt)*width + g*C + h*hd + d }
	split := func(src []float64, g, width int) []float64 {
		out := make([]float64, 0, B*H*T*hd)
		for b := range B {
			for h := range H {
				for tt := range T {
					for d := range hd {
						out = append(out, src[idx(g, b, h, tt, d, width)])
					}
				}
			}
		}
		return out
	}
	heads := func(v []float64, dt tensor.DType) *tensor.Tensor { return tensor.FromFloats(dev, dt, v, B, H, T, hd) }
	q, k, v := heads(split(qkvv, 0, 3*C), dt), heads(split(qkvv, 1, 3*C), dt), heads(split(qkvv, 2, 3*C), dt)
	qkv := tensor.FromFloats(dev, dt, qkvv, B, T, 3*C)

	y, lse := tensor.FusedCausalAttentionQKV(qkv, H, p, seed, offset)
	out, wantLSE := tensor.FusedCausalAttention(q, k, v, p, seed, offset)
	require.Equal(t, []int{B, T, C}, y.Shape())
	require.Equal(t, acc, y.DType())
	require.Equal(t, split(y.Float64s(), 0, C), out.Float64s(), "y, %v hd %d on %v", dt, hd, dev)
	require.Equal(t, wantLSE.Float64s(), lse.Float64s(), "lse")

	dy := tensor.FromFloats(dev, acc, dyv, B, T, C)
	dqkv := tensor.FusedCausalAttentionQKVBackward(qkv, y, lse, dy, H, p, seed, offset)
	dq, dk, dv := tensor.FusedCausalAttentionBackward(q, k, v, out, wantLSE, heads(split(dyv, 0, C), acc), p, seed, offset)
	require.Equal(t, []int{B, T, 3 * C}, dqkv.Shape())
	got := dqkv.Float64s()
	for g, want := range []*tensor.Tensor{dq, dk, dv} {
		require.Equal(t, want.Float64s(), split(got, g, 3*C), "gradient of group %d, %v hd %d on %v", g, dt, hd, dev)
	}
}

// Bad operands of the QKV ops fail with errors that say what is wrong.
func TestFusedAttentionQKVRejects(t *testing.T) {
	tensor.WithScope(func() {
		x := tensor.Zeros(tensor.CPU(), tensor.Float32, 2, 5, 12)
		for _, c := range []struct {
			f    func()
			want error
			msg  string
		}{
			{func() { tensor.FusedCausalAttentionQKV(x, 3, 0, 0, 0) }, tensor.ErrShape, "C a multiple of the heads"},
			{func() { tensor.FusedCausalAttentionQKV(x, 0, 0, 0, 0) }, tensor.ErrShape, "0 heads"},
			{func() { tensor.FusedCausalAttentionQKV(x.Reshape(10, 12), 2, 0, 0, 0) }, tensor.ErrShape, "want (B, T, 3C)"},
			{func() { tensor.FusedCausalAttentionQKV(x, 2, 1, 0, 0) }, tensor.ErrArgument, "dropout probability 1"},
			{func() { tensor.FusedCausalAttentionQKV(tensor.Zeros(tensor.CPU(), tensor.Int32, 2, 5, 12), 2, 0, 0, 0) }, tensor.ErrDType, "FusedCausalAttentionQKV"},
			{func() {
				y, lse := tensor.FusedCausalAttentionQKV(x, 2, 0, 0, 0)
				tensor.FusedCausalAttentionQKVBackward(x, y, lse, lse, 2, 0, 0, 0)
			}, tensor.ErrShape, "y/dy"},
			{func() {
				y, _ := tensor.FusedCausalAttentionQKV(x, 2, 0, 0, 0)
				tensor.FusedCausalAttentionQKVBackward(x, y, y, y, 2, 0, 0, 0)
			}, tensor.ErrShape, "lse"},
		} {
			err := tensor.Try(c.f)
			require.ErrorIs(t, err, c.want)
			require.ErrorContains(t, err, c.msg)
		}
	})
}
