package tensor_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/tensor"
)

// TestCUDAFusedAttentionConformance: FusedCausalAttention and its
// backward on every device and input dtype against the CPU's float64
// run on the same (rounded) inputs, at a padded head size and one that
// fills its kernel, with dropout (float32 on CUDA: the three-TF32-product
// kernels, within float32's tolerance); float64 is the CPU's alone (cuda
// refuses it, and heads wider than 128, with an error).
func TestCUDAFusedAttentionConformance(t *testing.T) {
	onDevices(t, func(t *testing.T, dev tensor.Device) {
		for _, dt := range []tensor.DType{tensor.Float32, tensor.Float16, tensor.BFloat16, tensor.Float64} {
			for _, hd := range []int{40, 64} {
				if dt == tensor.Float64 && dev != tensor.CPU() {
					continue
				}
				tensor.WithScope(func() { checkFusedAttention(t, dev, dt, hd) })
			}
		}
		if dev != tensor.CPU() {
			tensor.WithScope(func() {
				x := tensor.Zeros(dev, tensor.Float64, 1, 1, 3, 8)
				err := tensor.Try(func() { tensor.FusedCausalAttention(x, x, x, 0, 0, 0) })
				require.True(t, errors.Is(err, tensor.ErrDType), "float64 on %v: %v", dev, err)
				y := tensor.Zeros(dev, tensor.Float32, 1, 1, 3, 129)
				err = tensor.Try(func() { tensor.FusedCausalAttention(y, y, y, 0, 0, 0) })
				require.True(t, errors.Is(err, tensor.ErrShape), "hd 129 on %v: %v", dev, err)
			})
		}
	})
}

func checkFusedAttention(t *testing.T, dev tensor.Device, dt tensor.DType, hd int) {
	const B, H, T, p, seed, offset = 2, 3, 45, 0.15, 21, 7
	rng := rand.New(rand.NewPCG(uint64(hd), uint64(dt)))
	var in, ref []*tensor.Tensor
	for range 3 {
		x := tensor.RandN(tensor.CPU(), tensor.Float32, rng, 1, B, H, T, hd).To(dt)
		in = append(in, x.ToDevice(dev))
		ref = append(ref, x.To(tensor.Float64))
	}
	acc := tensor.AccumDType(dt)
	g := tensor.RandN(tensor.CPU(), tensor.Float32, rng, 1, B, H, T, hd)
	out, lse := tensor.FusedCausalAttention(in[0], in[1], in[2], p, seed, offset)
	require.Equal(t, acc, out.DType())
	require.Equal(t, []int{B, H, T}, lse.Shape())
	dq, dk, dv := tensor.FusedCausalAttentionBackward(in[0], in[1], in[2], out, lse, g.To(acc).ToDevice(dev), p, seed, offset)
	rout, rlse := tensor.FusedCausalAttention(ref[0], ref[1], ref[2], p, seed, offset)
	rdq, rdk, rdv := tensor.FusedCausalAttentionBackward(ref[0], ref[1], ref[2], rout, rlse, g.To(tensor.Float64), p, seed, offset)
	tol := 1e-5
	switch dt {
	case tensor.Float64:
		tol = 1e-12
	case tensor.Float16, tensor.BFloat16:
		if dev != tensor.CPU() {
			// The GPU's tensor-core kernels round the probabilities and the
			// gradients to the input type before each product, as
			// FlashAttention-2 does: a few unit roundoffs (2^-11, 2^-8).
			tol = 4.0 / 2048
			if dt == tensor.BFloat16 {
				tol = 4.0 / 256
			}
		}
	}
	for i, pair := range [][2]*tensor.Tensor{{out, rout}, {lse, rlse}, {dq, rdq}, {dk, rdk}, {dv, rdv}} {
		got, want := pair[0].Float64s(), pair[1].Float64s()
		var num, den float64
		for j := range want {
			num = max(num, math.Abs(got[j]-want[j]))
			den = max(den, math.Abs(want[j]))
		}
		require.LessOrEqual(t, num/max(den, 1), tol, "%v hd %d: %s", dt, hd, []string{"out", "lse", "dq", "dk", "dv"}[i])
	}
}
