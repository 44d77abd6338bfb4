package tensor_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/tensor"
)

// FusedCausalAttentionQKVMode with TF32 on float32 operands: on CUDA, head
// sizes up to 64 run the TF32 tensor-core kernels, within TF32's roundoff
// of a float64 reference and not bit for bit the result without TF32 (the
// three-product kernels, float32-accurate: the rounding would have to
// leave every element untouched); a wider head (100) has no tensor-core
// kernel and gives the float32-math bits either way. The CPU ignores the
// mode: the same bits as without it. With dropout, at a head size that
// fills its kernel and padded ones.
func TestFusedAttentionQKVTF32(t *testing.T) {
	onDevices(t, func(t *testing.T, dev tensor.Device) {
		for _, hd := range []int{16, 40, 64, 100} {
			tensor.WithScope(func() { checkQKVTF32(t, dev, hd) })
		}
	})
}

func checkQKVTF32(t *testing.T, dev tensor.Device, hd int) {
	const B, H, T, p, seed, offset = 2, 3, 70, 0.1, 5, 9
	C := H * hd
	rng := rand.New(rand.NewPCG(uint64(hd), 32))
	qkvv := tensor.RandN(tensor.CPU(), tensor.Float32, rng, 1, B, T, 3*C).Float64s()
	dyv := tensor.RandN(tensor.CPU(), tensor.Float32, rng, 1, B, T, C).Float64s()
	tf32 := tensor.AttentionMode{TF32: true}
	run := func(dev tensor.Device, dt tensor.DType, mode tensor.AttentionMode) [][]float64 {
		qkv := tensor.FromFloats(dev, dt, qkvv, B, T, 3*C)
		y, lse := tensor.FusedCausalAttentionQKVMode(qkv, H, p, seed, offset, mode)
		dqkv := tensor.FusedCausalAttentionQKVBackwardMode(qkv, y, lse, tensor.FromFloats(dev, dt, dyv, B, T, C), H, p, seed, offset, mode)
		return [][]float64{y.Float64s(), lse.Float64s(), dqkv.Float64s()}
	}
	got, plain := run(dev, tensor.Float32, tf32), run(dev, tensor.Float32, tensor.AttentionMode{})
	onTensorCores := dev.Kind() == tensor.KindCUDA && hd <= 64
	names := []string{"y", "lse", "dqkv"}
	for i := range got {
		if !onTensorCores {
			require.Equal(t, plain[i], got[i], "%s, hd %d on %v: float32 math, as without TF32", names[i], hd, dev)
			continue
		}
		require.NotEqual(t, plain[i], got[i], "%s, hd %d on %v: TF32 changed nothing (did the float32-accurate kernels run?)", names[i], hd, dev)
	}
	if !onTensorCores {
		return
	}
	// TF32 keeps 10 mantissa bits, as float16: a few units of 2^-11
	// relative to the largest element, as the half-precision kernels.
	want := run(tensor.CPU(), tensor.Float64, tensor.AttentionMode{})
	for i := range got {
		num, den := 0.0, 0.0
		for j, w := range want[i] {
			num = math.Max(num, math.Abs(got[i][j]-w))
			den = math.Max(den, math.Abs(w))
		}
		require.LessOrEqual(t, num/max(den, 1), 4.0/2048, "%s, hd %d on %v", names[i], hd, dev)
	}
}
