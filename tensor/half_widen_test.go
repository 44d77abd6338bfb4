package tensor_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/tensor"
)

// Half gradients (bf16 and fp16) in gradient clipping's reductions:
// SumSquaresAll gives the float64 reference's sum beside float32 and
// float64 tensors, and of one half tensor alone, small or of many chunks
// (on a GPU its kernels read them as they are; on the CPU they are widened
// to float32 a bounded group at a time, here 1 KiB, so that every tensor
// is a group and a few share one); ScaleAll
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
			big := tensor.RandN(dev, tensor.Float32, rng, 1, 3, 70001).To(tensor.Float16)
			for _, x := range []*tensor.Tensor{ts[5], big} {
				var want float64
				for _, v := range x.Float64s() {
					want += v * v
				}
				require.InEpsilon(t, want, tensor.SumSquaresAll([]*tensor.Tensor{x}), 1e-12, "%v %v alone", x.DType(), x.Shape())
			}

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

// AdamWSteps, AdamWStepsOverlapped and AdamWStepsPipelined take bf16 and
// fp16 gradients of float32 parameters beside float32 ones and update
// exactly as with them widened to float32 beforehand: on a GPU the kernel
// reads them as they are (a parameter of two table rows among them, whose
// second row starts 64 Ki half elements in; one of 34 rows, more than the
// side stream's default grid of a quarter of an H200's SMs, so that its
// blocks stride; and a gradient that starts 2 bytes past an 8-byte
// boundary, which takes the kernel's scalar path), on the CPU they are widened
// in groups (1 KiB here: a few parameters each, a large one alone). The
// guarded update refuses them, naming the parameter, before changing
// anything.
func TestAdamWStepsHalfGradients(t *testing.T) {
	defer tensor.SetHalfWidenGroup(1 << 10)()
	shapes := [][]int{{16, 24}, {24}, {40, 16}, {7}, {100, 3}, {5}, {300, 300}, {34, 1 << 16}}
	wd := []float64{0.1, 0, 0.1, 0, 0.1, 0, 0.1, 0.1}
	updates := map[string]func(ps, gs, ms, vs []*tensor.Tensor, step int){
		"plain": func(ps, gs, ms, vs []*tensor.Tensor, step int) {
			tensor.AdamWSteps(ps, gs, ms, vs, wd, 1e-2, 0.9, 0.95, 1e-8, step)
		},
		"overlapped": func(ps, gs, ms, vs []*tensor.Tensor, step int) {
			tensor.AdamWStepsOverlapped(ps, gs, ms, vs, wd, 1e-2, 0.9, 0.95, 1e-8, step, 4<<10)
		},
		"pipelined": func(ps, gs, ms, vs []*tensor.Tensor, step int) {
			tensor.AdamWStepsPipelined(ps, gs, ms, vs, wd, 1e-2, 0.9, 0.95, 1e-8, step, []int{2, 4, 8}, 0, nil)
		},
		"pipelined, one block": func(ps, gs, ms, vs []*tensor.Tensor, step int) {
			tensor.AdamWStepsPipelined(ps, gs, ms, vs, wd, 1e-2, 0.9, 0.95, 1e-8, step, []int{2, 4, 8}, 1, nil)
		},
	}
	onDevices(t, func(t *testing.T, dev tensor.Device) {
		for name, update := range updates {
			tensor.WithScope(func() {
				rng := rand.New(rand.NewPCG(7, 8))
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
				for step := 1; step <= 3; step++ {
					var gh, gw []*tensor.Tensor
					for i, s := range shapes {
						g := tensor.RandN(dev, tensor.Float32, rng, 1, s...)
						switch {
						case i == 1: // a contiguous view 2 bytes past an 8-byte boundary
							g = tensor.Concat(0, tensor.Zeros(dev, tensor.Float32, 1), g).To(tensor.Float16).Narrow(0, 1, s[0])
						case i%3 == 0:
							g = g.To(tensor.BFloat16)
						case i%3 == 1:
							g = g.To(tensor.Float16)
						}
						gh, gw = append(gh, g), append(gw, g.To(tensor.Float32))
					}
					update(ph, gh, mh, vh, step)
					update(pw, gw, mw, vw, step)
					require.NoError(t, dev.Synchronize())
					for i := range shapes {
						require.Equal(t, pw[i].Float64s(), ph[i].Float64s(), "%s: step %d parameter %d", name, step, i)
						require.Equal(t, mw[i].Float64s(), mh[i].Float64s(), "%s: step %d first moment %d", name, step, i)
						require.Equal(t, vw[i].Float64s(), vh[i].Float64s(), "%s: step %d second moment %d", name, step, i)
					}
				}
			})
		}

		tensor.WithScope(func() {
			r := rand.New(rand.NewPCG(9, 10))
			p, m, v := tensor.RandN(dev, tensor.Float32, r, 0.5, 16, 24), tensor.Zeros(dev, tensor.Float32, 16, 24), tensor.Zeros(dev, tensor.Float32, 16, 24)
			before := p.Float64s()
			args, err := tensor.NewAdamWArgs(dev)
			require.NoError(t, err)
			defer args.Release()
			require.NoError(t, args.Set(1e-2, 0.9, 0.95, 1e-8, 4))
			err = tensor.Try(func() {
				tensor.AdamWStepsGuarded([]*tensor.Tensor{p}, []*tensor.Tensor{tensor.Zeros(dev, tensor.BFloat16, 16, 24)}, []*tensor.Tensor{m}, []*tensor.Tensor{v}, wd[:1], args, nil)
			})
			require.ErrorIs(t, err, tensor.ErrDType)
			require.ErrorContains(t, err, "parameter 0 has a bfloat16 gradient")
			require.Equal(t, before, p.Float64s(), "nothing changed")
		})
	})
}
