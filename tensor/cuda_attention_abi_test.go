package tensor

import "testing"

// driveAttention launches every fused-attention kernel of a fake device
// (TestCUDALaunchersMatchKernels checks each launch): each input dtype and
// head size, forward and backward, with and without dropout, at a head
// size that needs padding and one that does not; the half types through
// the tensor-core kernels and, with EnvAttention=simt, the others.
func driveAttention(t *testing.T, d *cudaDevice, b cudaBackend) {
	t.Helper()
	driveAttentionKernels(t, d, b)
	t.Setenv(EnvAttention, "simt")
	driveAttentionKernels(t, d, b)
}

func driveAttentionKernels(t *testing.T, d *cudaDevice, b cudaBackend) {
	const bh, T = 3, 37
	for _, dt := range attnDTypes {
		for _, hd := range []int{16, 24, 32, 64, 100, 128} {
			n := func(dt DType, shape ...int) *Tensor { return mustNew("t", nil, d, dt, shape) }
			q, k, v := n(dt, bh, T, hd), n(dt, bh, T, hd), n(dt, bh, T, hd)
			out, lse, dout := n(Float32, bh, T, hd), n(Float32, bh, T), n(Float32, bh, T, hd)
			for _, p := range []float64{0, 0.1} {
				b.attentionForward(out, lse, q, k, v, bh, T, hd, 0.125, p, 7, 5)
				b.attentionBackward(n(Float32, bh, T, hd), n(Float32, bh, T, hd), n(Float32, bh, T, hd), q, k, v, out, dout, lse, bh, T, hd, 0.125, p, 7, 5)
			}
		}
	}
}
