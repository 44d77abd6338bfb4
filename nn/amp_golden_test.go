package nn_test

import (
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/amp"
	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/nn"
	"github.com/strata-ml/strata/tensor"
)

// ampGolden checks the GPT's loss, logits and every gradient under
// autocast against PyTorch's torch.autocast with the same float32 weights
// and batch (tools/golden/gpt_amp.py), on dev.
//
// Tolerances: both sides round the operands of every matrix product to
// the half type (unit roundoff u = 2^-8 for bfloat16, 2^-11 for float16)
// and accumulate in float32, but PyTorch also rounds each product's
// result and runs GELU and the attention's matmul inputs in the half
// type, where strata keeps float32 results (tensor.MatMulMode.Float32Out).
// So the two differ by a few roundings of size u per layer, compounding
// over the 2-layer model and again in backward: we allow 8u on the loss
// and the logits and 40u on the gradients (relative, in the 2-norm). The
// float32 golden of the same model is 1e-4 from strata's float32 run; a
// bug in the low-precision path (a wrong cast, a missing scale) shows as
// errors of order 1.
func ampGolden(t *testing.T, dev tensor.Device, file string, dt tensor.DType) {
	path := filepath.Join("testdata", file)
	if _, err := os.Stat(path); err != nil {
		t.Skipf("%s: %v (made on the GPU machine by tools/golden/gpt_amp.py)", path, err)
	}
	u := 1.0 / 256
	if dt == tensor.Float16 {
		u = 1.0 / 2048
	}
	c := tensor.NewCtx()
	c.WithScope(func() {
		g, ts := goldenGPTOn(t, path, tensor.Float32, dev)
		defer nn.Release(g.Parameters())
		defer func() {
			for _, v := range ts {
				v.Release()
			}
		}()
		idx := c.Adopt(ts["idx"].ToDevice(dev))
		tgt := c.Adopt(ts["targets"].ToDevice(dev))
		var loss float64
		var plain []float64
		autograd.NoGradIn(c, func() { plain = g.Forward(idx).Value.Float64s() })
		amp.Autocast(c, dt, func() {
			logits := g.Forward(idx)
			require.Equal(t, tensor.Float32, logits.Value.DType(), "autocast products return float32")
			got := logits.Value.Float64s()
			e := relErr(got, ts["logits"].Float64s())
			require.Less(t, e, 8*u, "logits: relative error %.3g", e)
			d := relErr(got, plain)
			require.Greater(t, d, u/64, "the products ran in %v (%.3g from float32)", dt, d)
			t.Logf("logits: %.2e from PyTorch's autocast, %.2e from strata's float32 run", e, d)
			l := nn.CrossEntropy(logits, tgt)
			loss = l.Item()
			require.NoError(t, l.Backward())
		})
		want := ts["loss"].Item()
		require.Less(t, math.Abs(loss-want)/want, 8*u, "loss %v vs PyTorch %v", loss, want)
		for _, p := range g.Parameters() {
			require.NotNil(t, p.Grad, p.Name)
			e := relErr(p.Grad.Float64s(), ts["grad."+p.Name].Float64s())
			require.Less(t, e, 40*u, "gradient of %s: relative error %.3g", p.Name, e)
			t.Logf("%s: gradient relative error %.2e (%.1fu)", p.Name, e, e/u)
		}
	})
	require.Zero(t, c.BytesInUse())
}

// TestGPTAutocastBF16MatchesPyTorchCPU: bfloat16 autocast on the CPU
// against PyTorch's CPU autocast (runs on CI).
func TestGPTAutocastBF16MatchesPyTorchCPU(t *testing.T) {
	ampGolden(t, tensor.CPU(), "golden_gpt_amp_bf16.safetensors", tensor.BFloat16)
}

// TestGPTAutocastFP16MatchesPyTorchGPU: float16 autocast on the GPU
// against PyTorch's CUDA autocast (the golden file is made there).
func TestGPTAutocastFP16MatchesPyTorchGPU(t *testing.T) {
	dev, err := tensor.CUDA(0)
	if err != nil {
		if os.Getenv("STRATA_REQUIRE_GPU") != "" {
			t.Fatalf("STRATA_REQUIRE_GPU is set: %v", err)
		}
		t.Skipf("no CUDA device: %v", err)
	}
	ampGolden(t, dev, "golden_gpt_amp_fp16.safetensors", tensor.Float16)
}

// TestGPTAutocastBF16MatchesPyTorchOnGPU: the CPU's bfloat16 golden on
// the GPU (cuBLAS's bfloat16 GEMM against the CPU's widened sgemm).
func TestGPTAutocastBF16MatchesPyTorchOnGPU(t *testing.T) {
	dev, err := tensor.CUDA(0)
	if err != nil {
		t.Skipf("no CUDA device: %v", err)
	}
	ampGolden(t, dev, "golden_gpt_amp_bf16.safetensors", tensor.BFloat16)
}
