package tensor_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/tensor"
)

// The padded cross-entropy reads only the first classes columns of each
// row: with NaN, infinities and huge values in the padding, the loss and
// the classes' gradient equal the plain op's on the real logits bit for
// bit, and the padding's gradient is exactly zero.
func TestCrossEntropyPaddedIgnoresPadding(t *testing.T) {
	cpu := tensor.CPU()
	rng := rand.New(rand.NewPCG(3, 4))
	for _, dt := range []tensor.DType{tensor.Float32, tensor.Float64} {
		tensor.WithScope(func() {
			const rows, classes, ld = 37, 53, 64
			realv := make([]float64, rows*classes)
			for i := range realv {
				realv[i] = 3 * rng.NormFloat64()
			}
			real := tensor.FromFloat64s(cpu, realv, rows, classes).To(dt)
			padv := make([]float64, rows*(ld-classes))
			for i := range padv {
				padv[i] = []float64{math.NaN(), math.Inf(1), math.Inf(-1), 1e30}[i%4]
			}
			logits := tensor.Concat(1, real, tensor.FromFloat64s(cpu, padv, rows, ld-classes).To(dt))
			tg := make([]int32, rows)
			for i := range tg {
				tg[i] = int32(rng.IntN(classes))
				if i%5 == 2 {
					tg[i] = -100
				}
			}
			targets := tensor.FromInt32s(cpu, tg, rows)
			dloss := tensor.FromFloat64s(cpu, make([]float64, rows), rows).To(dt)
			dloss.Fill(0.25)

			loss, n := tensor.CrossEntropyPadded(logits, classes, targets, -100)
			want, wn := tensor.CrossEntropy(real, targets, -100)
			require.Equal(t, wn, n)
			require.Equal(t, want.Float64s(), loss.Float64s(), "%v loss", dt)

			d := tensor.CrossEntropyPaddedBackward(logits, classes, targets, dloss, -100)
			require.Equal(t, []int{rows, ld}, d.Shape())
			wantD := tensor.CrossEntropyBackward(real, targets, dloss, -100)
			require.Equal(t, wantD.Float64s(), d.Narrow(1, 0, classes).Contiguous().Float64s(), "%v gradient", dt)
			for i, v := range d.Narrow(1, classes, ld-classes).Contiguous().Float64s() {
				require.Zero(t, v, "%v padding gradient %d", dt, i)
			}
		})
	}
}

func TestCrossEntropyPaddedRejectsBadClassCounts(t *testing.T) {
	tensor.WithScope(func() {
		cpu := tensor.CPU()
		logits := tensor.Zeros(cpu, tensor.Float32, 2, 8)
		targets := tensor.FromInt32s(cpu, []int32{0, 5}, 2)
		for _, classes := range []int{0, 9, -2, -8} {
			err := tensor.Try(func() { tensor.CrossEntropyPadded(logits, classes, targets, -100) })
			require.ErrorIs(t, err, tensor.ErrShape)
			require.ErrorContains(t, err, "classes in rows of 8 logits")
		}
		// A target among the padding is out of range.
		err := tensor.Try(func() { tensor.CrossEntropyPadded(logits, 4, targets, -100) })
		require.ErrorIs(t, err, tensor.ErrArgument)
		require.ErrorContains(t, err, "target of row 1 is 5")
		err = tensor.Try(func() {
			tensor.CrossEntropyPaddedBackward(logits, 9, targets, tensor.Ones(cpu, tensor.Float32, 2), -100)
		})
		require.ErrorIs(t, err, tensor.ErrShape)
		// A negative count other than -1 (every column) is refused, not
		// read as -1: the fused loss took the padding for classes.
		err = tensor.Try(func() {
			tensor.CrossEntropyFused(logits, -2, targets, tensor.Ones(cpu, tensor.Float32, 2), -100, tensor.Float32)
		})
		require.ErrorIs(t, err, tensor.ErrShape)
		require.NoError(t, tensor.Try(func() {
			tensor.CrossEntropyFused(logits, -1, targets, tensor.Ones(cpu, tensor.Float32, 2), -100, tensor.Float32)
		}))
	})
}

// The fused cross-entropy's float16 and bfloat16 gradients are the
// float32 gradient rounded: on the CPU exactly Cast's rounding of it, on
// a GPU within one unit in the last place of the half type (its float32
// sum may differ from the CPU's in the last bits).
func TestCrossEntropyFusedHalfGradient(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	const rows, classes, ld = 7, 50257, 50304
	v := make([]float64, rows*classes)
	for i := range v {
		v[i] = 4 * rng.NormFloat64()
	}
	tg := make([]int32, rows)
	for i := range tg {
		tg[i] = int32(rng.IntN(classes))
	}
	tg[3] = -100
	cpu := tensor.CPU()
	onDevices(t, func(t *testing.T, dev tensor.Device) {
		tensor.WithScope(func() { // released before the next test measures memory
			logits := tensor.Concat(1, tensor.FromFloat64s(dev, v, rows, classes).To(tensor.Float32), tensor.Full(dev, tensor.Float32, 7, rows, ld-classes))
			targets := tensor.FromInt32s(dev, tg, rows)
			dloss := tensor.Full(dev, tensor.Float32, 0.5, rows)
			ref := tensor.CrossEntropyPaddedBackward(logits.ToDevice(cpu), classes, targets.ToDevice(cpu), dloss.ToDevice(cpu), -100)
			for _, half := range []tensor.DType{tensor.Float16, tensor.BFloat16} {
				_, d := tensor.CrossEntropyFused(logits, classes, targets, dloss, -100, half)
				require.Equal(t, half, d.DType())
				got, want := d.ToDevice(cpu).Float64s(), ref.To(half).Float64s()
				ulp := map[tensor.DType]float64{tensor.Float16: 0x1p-10, tensor.BFloat16: 0x1p-7}[half]
				for i := range want {
					if dev == cpu {
						require.Equal(t, want[i], got[i], "%v %v element %d", dev, half, i)
					} else if math.Abs(got[i]-want[i]) > ulp*math.Abs(want[i])+1e-7 {
						t.Fatalf("%v %v element %d: %g, want %g within one ulp", dev, half, i, got[i], want[i])
					}
				}
				for c := classes; c < ld; c++ {
					require.Zero(t, got[c], "padding")
				}
			}
		})
	})
}

// Half logits (a half-precision head product) give the loss and gradient
// of the same logits widened to float32: the kernel widens them exactly as
// it reads them. The loss is float32; a half dloss is refused.
func TestCrossEntropyFusedHalfLogits(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	const rows, classes, ld = 5, 50257, 50304
	v := make([]float64, rows*ld)
	for i := range v {
		v[i] = 4 * rng.NormFloat64()
	}
	tg := make([]int32, rows)
	for i := range tg {
		tg[i] = int32(rng.IntN(classes))
	}
	tg[2] = -100
	cpu := tensor.CPU()
	onDevices(t, func(t *testing.T, dev tensor.Device) {
		tensor.WithScope(func() {
			targets := tensor.FromInt32s(dev, tg, rows)
			dloss := tensor.Full(dev, tensor.Float32, 0.5, rows)
			for _, half := range []tensor.DType{tensor.Float16, tensor.BFloat16} {
				for _, cols := range []int{ld, 9} { // 9: rows that break the 4-logit words
					logits := tensor.FromFloat64s(dev, v[:rows*cols], rows, cols).To(half)
					c, tc := min(classes, cols), targets
					if cols < classes {
						small := make([]int32, rows)
						for i, x := range tg {
							small[i] = x % int32(cols)
							if x < 0 {
								small[i] = x // the ignore index
							}
						}
						tc = tensor.FromInt32s(dev, small, rows)
					}
					loss, d := tensor.CrossEntropyFused(logits, c, tc, dloss, -100, half)
					require.Equal(t, tensor.Float32, loss.DType())
					require.Equal(t, half, d.DType())
					wl, wd := tensor.CrossEntropyFused(logits.To(tensor.Float32), c, tc, dloss, -100, half)
					require.Equal(t, wl.ToDevice(cpu).Float64s(), loss.ToDevice(cpu).Float64s(), "%v %v loss", dev, half)
					require.Equal(t, wd.ToDevice(cpu).Float64s(), d.ToDevice(cpu).Float64s(), "%v %v gradient", dev, half)
				}
				logits := tensor.Zeros(dev, half, rows, 8)
				err := tensor.Try(func() { tensor.CrossEntropyFused(logits, 8, targets, dloss.To(half), -100, half) })
				require.ErrorIs(t, err, tensor.ErrDType)
				err = tensor.Try(func() { tensor.CrossEntropyFused(logits, 8, targets, dloss, -100, tensor.Float32) })
				require.ErrorIs(t, err, tensor.ErrDType)
			}
		})
	})
}

func TestCrossEntropyFusedRejects(t *testing.T) {
	tensor.WithScope(func() {
		cpu := tensor.CPU()
		logits := tensor.Zeros(cpu, tensor.Float32, 2, 8)
		targets := tensor.FromInt32s(cpu, []int32{0, 5}, 2)
		ones := tensor.Ones(cpu, tensor.Float32, 2)
		err := tensor.Try(func() { tensor.CrossEntropyFused(logits, 4, targets, ones, -100, tensor.Float32) })
		require.ErrorIs(t, err, tensor.ErrArgument)
		require.ErrorContains(t, err, "target of row 1 is 5")
		err = tensor.Try(func() { tensor.CrossEntropyFused(logits, 8, targets, ones, -100, tensor.Float64) })
		require.ErrorIs(t, err, tensor.ErrDType)
		err = tensor.Try(func() {
			tensor.CrossEntropyFused(logits.To(tensor.Float64), 8, targets, ones.To(tensor.Float64), -100, tensor.BFloat16)
		})
		require.ErrorIs(t, err, tensor.ErrDType)
		err = tensor.Try(func() {
			tensor.CrossEntropyFused(logits, 8, targets, tensor.Ones(cpu, tensor.Float32, 3), -100, tensor.Float32)
		})
		require.ErrorIs(t, err, tensor.ErrShape)
		require.Equal(t, 1, tensor.CountTargets(tensor.FromInt32s(cpu, []int32{-100, 3, -100}, 3), -100))
	})
}
