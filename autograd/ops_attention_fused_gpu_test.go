package autograd_test

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/tensor"
)

// attnGPU returns cuda:0, or skips (fails when STRATA_REQUIRE_GPU is set).
func attnGPU(t *testing.T) tensor.Device {
	t.Helper()
	dev, err := tensor.CUDA(0)
	if err != nil {
		if os.Getenv("STRATA_REQUIRE_GPU") != "" {
			t.Fatalf("STRATA_REQUIRE_GPU is set, but cuda:0 is unavailable: %v", err)
		}
		t.Skipf("no CUDA device: %v", err)
	}
	return dev
}

// TestFusedCausalAttentionGPU checks the CUDA kernels on every case of
// attentionCases (head sizes 16 to 128 and one padded, T not a multiple
// of any tile, dropout on and off):
//
//   - float32: output and gradients against the plain op on the GPU and
//     against the fused op on the CPU, up to float32 rounding; two runs
//     give the same bits (no atomics).
//   - float16 and bfloat16 autocast, on tensor cores: the kernels round
//     the probabilities, the output gradient and ds to the half type
//     before their products, as the plain op under autocast does; the two
//     differ by a few unit roundoffs u (2^-11, 2^-8), and so do they and
//     the plain float32 op on rounded inputs: at most 8u on the output
//     and 16u on the gradients, relative to the largest element.
//   - the same with the float32-math kernels (TestFusedCausalAttentionSIMTGPU,
//     tensor.EnvAttention=simt): they multiply the rounded inputs in
//     float32, so they equal the plain float32 op on rounded inputs up to
//     float32 rounding.
func TestFusedCausalAttentionGPU(t *testing.T) { testFusedAttentionOn(t, attnGPU(t)) }

// TestFusedCausalAttentionSIMTGPU: TestFusedCausalAttentionGPU with the
// float32-math kernels for the half types too.
func TestFusedCausalAttentionSIMTGPU(t *testing.T) {
	dev := attnGPU(t)
	t.Setenv(tensor.EnvAttention, "simt")
	testFusedAttentionOn(t, dev)
}

// tensorCores reports whether half-precision fused attention on dev runs
// the tensor-core kernels (which round their operands to the half type).
func tensorCores(dev tensor.Device) bool {
	return dev != tensor.CPU() && os.Getenv(tensor.EnvAttention) != "simt"
}

// TestFusedCausalAttentionOnCPU runs TestFusedCausalAttentionGPU's checks
// on the CPU (its half-precision inputs are widened to float32).
func TestFusedCausalAttentionOnCPU(t *testing.T) { testFusedAttentionOn(t, tensor.CPU()) }

func testFusedAttentionOn(t *testing.T, dev tensor.Device) {
	for _, tc := range attentionCases() {
		t.Run(tc.String(), func(t *testing.T) {
			c := tensor.NewCtx()
			c.WithScope(func() {
				xs, r := attentionInputs(c, dev, tc)
				fy, fg := runOp(t, c, fusedAttention(tc.p), xs, r, nil)
				py, pg := runOp(t, c, plainAttention(tc.p), xs, r, nil)
				require.Less(t, relErr(fy, py), 1e-5, "float32 output against plain")
				for i := range pg {
					require.Less(t, relErr(fg[i], pg[i]), 2e-5, "float32 gradient of %s against plain", "qkv"[i:i+1])
				}
				again, againG := runOp(t, c, fusedAttention(tc.p), xs, r, nil)
				require.Equal(t, fy, again, "deterministic output")
				require.Equal(t, fg, againG, "deterministic gradients")
				var cpu []*tensor.Tensor
				for _, x := range xs {
					cpu = append(cpu, x.ToDevice(tensor.CPU()))
				}
				cy, cg := runOp(t, c, fusedAttention(tc.p), cpu, r.ToDevice(tensor.CPU()), nil)
				require.Less(t, relErr(fy, cy), 1e-5, "float32 output against the cpu")
				for i := range cg {
					require.Less(t, relErr(fg[i], cg[i]), 2e-5, "float32 gradient of %s against the cpu", "qkv"[i:i+1])
				}
				for _, dt := range []tensor.DType{tensor.Float16, tensor.BFloat16} {
					u := 0x1p-11
					if dt == tensor.BFloat16 {
						u = 0x1p-8
					}
					var rounded []*tensor.Tensor
					for _, x := range xs {
						rounded = append(rounded, x.To(dt).To(tensor.Float32))
					}
					rr := r.To(dt).To(tensor.Float32)
					ay, ag := runOp(t, c, fusedAttention(tc.p), xs, rr, &dt)
					ry, rg := runOp(t, c, plainAttention(tc.p), rounded, rr, nil)
					tolY, tolG := 1e-5, 2e-5
					if tensorCores(dev) {
						tolY, tolG = 8*u, 16*u
					}
					require.Less(t, relErr(ay, ry), tolY, "%v: output against float32 on rounded inputs", dt)
					for i := range rg {
						require.Less(t, relErr(ag[i], rg[i]), tolG, "%v: gradient of %s against float32 on rounded inputs", dt, "qkv"[i:i+1])
					}
					hy, hg := runOp(t, c, plainAttention(tc.p), xs, rr, &dt)
					require.Less(t, relErr(ay, hy), 8*u, "%v: output against plain autocast", dt)
					for i := range hg {
						require.Less(t, relErr(ag[i], hg[i]), 16*u, "%v: gradient of %s against plain autocast", dt, "qkv"[i:i+1])
					}
				}
			})
		})
	}
}

// TestFusedCausalAttentionHalfInputsGPU: float16 and bfloat16 tensors
// given directly (no autocast) run the half kernels, return float32 and
// get gradients in their own dtype.
func TestFusedCausalAttentionHalfInputsGPU(t *testing.T) {
	dev := attnGPU(t)
	tc := attentionCase{2, 2, 45, 64, 0.1}
	for _, dt := range []tensor.DType{tensor.Float16, tensor.BFloat16} {
		c := tensor.NewCtx()
		c.WithScope(func() {
			xs, _ := attentionInputs(c, dev, tc)
			var vars, ref []*autograd.Var
			for _, x := range xs {
				h := x.To(dt)
				vars = append(vars, autograd.Const(h))
				ref = append(ref, autograd.Const(h.To(tensor.Float32)))
			}
			for _, v := range vars {
				v.SetRequiresGrad(true)
			}
			y := autograd.FusedCausalAttention(vars[0], vars[1], vars[2], tc.p, attnSeed, attnOffset)
			require.Equal(t, tensor.Float32, y.Value.DType())
			want := autograd.FusedCausalAttention(ref[0], ref[1], ref[2], tc.p, attnSeed, attnOffset)
			tol := 1e-6
			if tensorCores(dev) {
				tol = 8 * 0x1p-8 // the probabilities rounded to the half type
			}
			require.Less(t, relErr(y.Value.Float64s(), want.Value.Float64s()), tol, "%v output", dt)
			require.NoError(t, autograd.Sum(y, false).Backward())
			for _, v := range vars {
				require.Equal(t, dt, v.Grad.DType())
				v.ZeroGrad()
			}
		})
		require.Zero(t, c.BytesInUse())
	}
}

// TestFusedCausalAttentionActivationBytesGPU: the activation bytes of
// TestFusedCausalAttentionActivationBytes, on cuda:0.
func TestFusedCausalAttentionActivationBytesGPU(t *testing.T) {
	testAttentionActivationBytes(t, attnGPU(t))
}
