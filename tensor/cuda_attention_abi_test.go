package tensor

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/cuda"
)

// driveAttention launches every fused-attention kernel of a fake device
// (TestCUDALaunchersMatchKernels checks each launch): each input dtype and
// head size, forward and backward, with and without dropout, at a head
// size that needs padding and one that does not; the half types through
// the tensor-core kernels (mma3 and mma3drop), float32 with TF32 through
// theirs (head sizes up to 64) and, with EnvAttention=simt, the others.
func driveAttention(t *testing.T, d *cudaDevice, b cudaBackend) {
	t.Helper()
	driveAttentionKernels(t, d, b)
	t.Setenv(EnvAttention, "simt")
	driveAttentionKernels(t, d, b)
}

// TestAttentionMMA3Blocks checks attnMMA3Warps against the kernels: each
// mma3 and mma3drop kernel's __launch_bounds__ is its block, 32 threads a
// warp of 16 rows, so a launcher that disagreed would leave rows
// uncomputed.
func TestAttentionMMA3Blocks(t *testing.T) {
	abi := embeddedABI(t)
	for dr, gen := range attnMMA3Name {
		for p, pass := range attnPassName {
			for _, dt := range attnDTypes[1:] {
				for j, hd := range attnHeads {
					name := "attention_" + pass + "_" + gen + "_" + castSuffix[dt] + "_h" + strconv.Itoa(hd)
					k, ok := abi[name]
					if !ok {
						t.Fatalf("%s is not in the fatbin", name)
					}
					if want := 32 * attnMMA3Warps[dr][p][j]; k.maxThreads != want {
						t.Errorf("%s: launch bound %d threads, the launcher's block %d", name, k.maxThreads, want)
					}
				}
			}
			for x3, tn := range attnTF32Name {
				for j, w := range attnTF32Warps[x3][dr][p] {
					name := "attention_" + pass + "_" + gen + "_" + tn + "_h" + strconv.Itoa(attnHeads[j])
					k, ok := abi[name]
					if !ok {
						t.Fatalf("%s is not in the fatbin", name)
					}
					if k.maxThreads != 32*w {
						t.Errorf("%s: launch bound %d threads, the launcher's block %d", name, k.maxThreads, 32*w)
					}
				}
			}
		}
	}
}

func driveAttentionKernels(t *testing.T, d *cudaDevice, b cudaBackend) {
	const bh, T = 3, 37
	// Operands no kernel takes fail under the caller's name, before it
	// allocates anything.
	for _, c := range []struct {
		dt   DType
		hd   int
		want error
	}{{Float64, 64, ErrDType}, {Float16, 129, ErrShape}} {
		err := Try(func() {
			b.attentionRowsFit("FusedCausalAttentionQKV", c.dt, T, c.hd, attnRows{nh: 1, rsi: c.hd, rso: c.hd}, true)
		})
		if !errors.Is(err, c.want) || !strings.Contains(err.Error(), "FusedCausalAttentionQKV") {
			t.Errorf("%v hd %d: %v, want %v naming FusedCausalAttentionQKV", c.dt, c.hd, err, c.want)
		}
	}
	for _, dt := range attnDTypes {
		for _, hd := range []int{16, 24, 32, 64, 100, 128} {
			n := func(dt DType, shape ...int) *Tensor { return mustNew("t", nil, d, dt, shape) }
			q, k, v := n(dt, bh, T, hd), n(dt, bh, T, hd), n(dt, bh, T, hd)
			out, lse, dout := n(Float32, bh, T, hd), n(Float32, bh, T), n(Float32, bh, T, hd)
			for _, p := range []float64{0, 0.1} {
				b.attentionForward(out, lse, q, k, v, bh, T, hd, 0.125, p, 7, 5)
				b.attentionBackward(n(Float32, bh, T, hd), n(Float32, bh, T, hd), n(Float32, bh, T, hd), q, k, v, out, dout, lse, bh, T, hd, 0.125, p, 7, 5)
				// The heads of a (B, T, 3C) product in place: the
				// tensor-core kernels take them (float32 up to hd 64,
				// tf32 or tf32x3), the float32-math ones decline (the op then
				// copies).
				rows := attnRows{nh: 3, rsi: 9 * hd, rso: 3 * hd}
				for _, tf32 := range []bool{false, true} {
					mma := os.Getenv(EnvAttention) != "simt" && (dt != Float32 || hd <= 64)
					if got := b.attentionRowsFit("FusedCausalAttentionQKV", dt, T, hd, rows, tf32); got != mma {
						t.Errorf("%v hd %d tf32 %v: the kernels fit a (B, T, 3C) product: %v, want %v", dt, hd, tf32, got, mma)
					}
					if got := b.attentionForwardRows(out, lse, q, k, v, bh, T, hd, rows, tf32, 0.125, p, 7, 5); got != mma {
						t.Errorf("%v hd %d tf32 %v: forward over a (B, T, 3C) product ran %v, want %v", dt, hd, tf32, got, mma)
					}
					if got := b.attentionBackwardRows(n(Float32, bh, T, hd), n(Float32, bh, T, hd), n(Float32, bh, T, hd), q, k, v, out, dout, lse, bh, T, hd, rows, tf32, 0.125, p, 7, 5); got != mma {
						t.Errorf("%v hd %d tf32 %v: backward over a (B, T, 3C) product ran %v, want %v", dt, hd, tf32, got, mma)
					}
				}
			}
		}
	}
}

// TestGPUAttentionLaunchBounds checks readBlocks on the GPU: every
// tensor-core attention kernel's block comes from the driver, and with
// the embedded fatbin it is the launchers' table value (a fatbin named by
// EnvKernels may differ: the driver's value is the one launches use).
func TestGPUAttentionLaunchBounds(t *testing.T) {
	d := gpuForTest(t)
	k := &d.k.attention
	require.NotEmpty(t, k.warps)
	embedded := os.Getenv(EnvKernels) == ""
	n := 0
	require.NoError(t, k.eachTensorCore(func(fn *cuda.Function, want int) error {
		n++
		w, ok := k.warps[fn]
		require.True(t, ok, "%s has no launch bound", fn.Name())
		if embedded {
			require.Equal(t, want, w, fn.Name())
		}
		return nil
	}))
	require.Len(t, k.warps, n, "every tensor-core kernel once")
}
