package nn

import (
	"math/rand/v2"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/tensor"
)

// AdamW with half gradients (some parameters' bf16, others' float32)
// updates exactly as with those gradients widened to float32 beforehand,
// plain, pipelined and overlapped (tensor's AdamW updates take them; its
// test takes the groups apart); the guarded update refuses them with an
// error naming the parameter. On the CPU and on CUDA.
func TestAdamWHalfGradients(t *testing.T) {
	t.Run("cpu", func(t *testing.T) { testAdamWHalfGradients(t, tensor.CPU()) })
	t.Run("cuda", func(t *testing.T) {
		dev, err := tensor.CUDA(0)
		if err != nil {
			if os.Getenv("STRATA_REQUIRE_GPU") != "" {
				t.Fatalf("STRATA_REQUIRE_GPU is set, but cuda:0 is unavailable: %v", err)
			}
			t.Skipf("no CUDA device: %v", err)
		}
		testAdamWHalfGradients(t, dev)
	})
}

func testAdamWHalfGradients(t *testing.T, dev tensor.Device) {
	for _, mode := range []string{"plain", "pipelined", "overlapped"} {
		t.Run(mode, func(t *testing.T) { testAdamWHalfGradientsIn(t, dev, mode) })
	}
}

func testAdamWHalfGradientsIn(t *testing.T, dev tensor.Device, mode string) {
	rng := rand.New(rand.NewPCG(51, 52))
	shapes := [][]int{{16, 24}, {24}, {40, 16}, {7}, {100, 3}}
	mk := func() []*Parameter {
		r := rand.New(rand.NewPCG(53, 54))
		var ps []*Parameter
		for i, s := range shapes {
			v, err := tensor.NewKept(dev, tensor.Float32, 0, s...)
			require.NoError(t, err)
			tensor.WithScope(func() { v.CopyFrom(tensor.RandN(dev, tensor.Float32, r, 0.5, s...)) })
			ps = append(ps, &Parameter{Var: autograd.Param(v, "p"+string(rune('0'+i))), Name: "p" + string(rune('0'+i)), Decay: len(s) == 2})
		}
		return ps
	}
	half, wide := mk(), mk()
	defer Release(half)
	defer Release(wide)
	oh, ow := NewAdamW(half, 1e-2, 0.1), NewAdamW(wide, 1e-2, 0.1)
	defer oh.Release()
	defer ow.Release()
	for _, o := range []*AdamW{oh, ow} {
		o.Pipeline, o.Overlap = mode == "pipelined", mode == "overlapped"
	}
	for step := range 3 {
		for i, s := range shapes {
			tensor.WithScope(func() {
				g := tensor.RandN(dev, tensor.Float32, rng, 1, s...)
				if i%2 == 0 { // bf16 for the 2-D ones and one vector
					g = g.To(tensor.BFloat16)
				}
				half[i].Grad, wide[i].Grad = g.Clone(), g.To(tensor.Float32)
				tensor.Keep(half[i].Grad)
				tensor.Keep(wide[i].Grad)
			})
		}
		require.NoError(t, oh.Step(), "step %d", step)
		require.NoError(t, ow.Step(), "step %d", step)
		require.NoError(t, dev.Synchronize())
		for i := range shapes {
			require.Equal(t, wide[i].Value.Float64s(), half[i].Value.Float64s(), "step %d parameter %d", step, i)
		}
		ZeroGrad(half)
		ZeroGrad(wide)
	}

	if mode != "plain" {
		return
	}
	tensor.WithScope(func() {
		half[0].Grad = tensor.Zeros(dev, tensor.BFloat16, shapes[0]...)
		tensor.Keep(half[0].Grad)
	})
	defer half[0].ZeroGrad()
	args, err := tensor.NewAdamWArgs(dev)
	require.NoError(t, err)
	defer args.Release()
	require.ErrorContains(t, oh.StepGuarded(args, nil), "p0 has a bfloat16 gradient")
}
