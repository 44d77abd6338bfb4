package tensor_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/tensor"
)

// Half gradients (bf16 and fp16) in gradient clipping's reductions:
// SumSquaresAll widens them to float32 a bounded group at a time (here 1
// KiB, so that every tensor is a group and a few share one) and gives the
// float64 reference's sum beside float32 and float64 tensors; ScaleAll
// gives each half tensor its float32 value times alpha rounded once to its
// dtype, which is within a half's rounding of the float64 product.
func TestHalfGradientsInClipping(t *testing.T) {
	defer tensor.SetHalfWidenGroup(1 << 10)()
	onDevices(t, func(t *testing.T, dev tensor.Device) {
		tensor.WithScope(func() {
			rng := rand.New(rand.NewPCG(5, 6))
			ts := []*tensor.Tensor{
				tensor.RandN(dev, tensor.Float32, rng, 1, 37, 5),
				tensor.RandN(dev, tensor.Float32, rng, 1, 300, 7).To(tensor.BFloat16),
				tensor.RandN(dev, tensor.Float64, rng, 2, 11),
				tensor.RandN(dev, tensor.Float32, rng, 0.5, 40).To(tensor.Float16),
				tensor.RandN(dev, tensor.Float32, rng, 3, 60).To(tensor.BFloat16),
				tensor.RandN(dev, tensor.Float32, rng, 1, 1000).To(tensor.BFloat16),
			}
			var want float64
			before := make([][]float64, len(ts))
			for i, x := range ts {
				before[i] = x.Float64s() // exact: every dtype widens exactly
				for _, v := range before[i] {
					want += v * v
				}
			}
			got := tensor.SumSquaresAll(ts)
			require.InEpsilon(t, want, got, 1e-5, "sum of squares")

			const alpha = 0.3
			var ref []*tensor.Tensor
			for _, x := range ts {
				if x.DType().IsHalf() {
					w := x.To(tensor.Float32)
					w.ScaleInPlace(alpha)
					ref = append(ref, w.To(x.DType()))
				} else {
					ref = append(ref, nil)
				}
			}
			tensor.ScaleAll(ts, alpha)
			for i, x := range ts {
				after := x.Float64s()
				tol := 1e-6
				if x.DType() == tensor.BFloat16 {
					tol = 1.0 / 256
				} else if x.DType() == tensor.Float16 {
					tol = 1.0 / 2048
				}
				for j, v := range after {
					exact := before[i][j] * alpha
					require.LessOrEqual(t, math.Abs(v-exact), tol*math.Abs(exact)+1e-30, "tensor %d (%v) element %d: %v, want about %v", i, x.DType(), j, v, exact)
				}
				if ref[i] != nil {
					require.Equal(t, ref[i].Float64s(), after, "tensor %d: the float32 product rounded once", i)
				}
			}
		})
	})
}

// AdamWSteps takes bf16 and fp16 gradients of float32 parameters beside
// float32 ones and updates exactly as with them widened to float32
// beforehand, in groups (1 KiB here: a few parameters each, a large one
// alone); the overlapped, pipelined and guarded updates refuse them,
// naming the parameter, before changing anything.
func TestAdamWStepsHalfGradients(t *testing.T) {
	defer tensor.SetHalfWidenGroup(1 << 10)()
	onDevices(t, func(t *testing.T, dev tensor.Device) {
		tensor.WithScope(func() {
			rng := rand.New(rand.NewPCG(7, 8))
			shapes := [][]int{{16, 24}, {24}, {40, 16}, {7}, {100, 3}, {5}}
			mk := func() (ps, ms, vs []*tensor.Tensor) {
				r := rand.New(rand.NewPCG(9, 10))
				for _, s := range shapes {
					ps = append(ps, tensor.RandN(dev, tensor.Float32, r, 0.5, s...))
					ms = append(ms, tensor.RandN(dev, tensor.Float32, r, 0.1, s...))
					v := tensor.RandN(dev, tensor.Float32, r, 0.3, s...)
					vs = append(vs, tensor.Mul(v, v)) // second moments are not negative
				}
				return ps, ms, vs
			}
			ph, mh, vh := mk()
			pw, mw, vw := mk()
			wd := []float64{0.1, 0, 0.1, 0, 0.1, 0}
			for step := 1; step <= 3; step++ {
				var gh, gw []*tensor.Tensor
				for i, s := range shapes {
					g := tensor.RandN(dev, tensor.Float32, rng, 1, s...)
					switch i % 3 {
					case 0:
						g = g.To(tensor.BFloat16)
					case 1:
						g = g.To(tensor.Float16)
					}
					gh, gw = append(gh, g), append(gw, g.To(tensor.Float32))
				}
				tensor.AdamWSteps(ph, gh, mh, vh, wd, 1e-2, 0.9, 0.95, 1e-8, step)
				tensor.AdamWSteps(pw, gw, mw, vw, wd, 1e-2, 0.9, 0.95, 1e-8, step)
				for i := range shapes {
					require.Equal(t, pw[i].Float64s(), ph[i].Float64s(), "step %d parameter %d", step, i)
					require.Equal(t, vw[i].Float64s(), vh[i].Float64s(), "step %d second moment %d", step, i)
				}
			}

			before := ph[0].Float64s()
			gs := []*tensor.Tensor{tensor.Zeros(dev, tensor.BFloat16, shapes[0]...)}
			one := func(ts []*tensor.Tensor) []*tensor.Tensor { return ts[:1] }
			args, err := tensor.NewAdamWArgs(dev)
			require.NoError(t, err)
			defer args.Release()
			require.NoError(t, args.Set(1e-2, 0.9, 0.95, 1e-8, 4))
			for name, update := range map[string]func(){
				"overlapped": func() {
					tensor.AdamWStepsOverlapped(one(ph), gs, one(mh), one(vh), wd[:1], 1e-2, 0.9, 0.95, 1e-8, 4, 1<<20)
				},
				"pipelined": func() {
					tensor.AdamWStepsPipelined(one(ph), gs, one(mh), one(vh), wd[:1], 1e-2, 0.9, 0.95, 1e-8, 4, []int{1}, 0, nil)
				},
				"guarded": func() { tensor.AdamWStepsGuarded(one(ph), gs, one(mh), one(vh), wd[:1], args, nil) },
			} {
				err := tensor.Try(update)
				require.ErrorIs(t, err, tensor.ErrDType, name)
				require.ErrorContains(t, err, "parameter 0 has a bfloat16 gradient", name)
				require.Equal(t, before, ph[0].Float64s(), "%s: nothing changed", name)
			}
		})
	})
}
