package tensor_test

import (
	"fmt"
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
	}
}

func TestCrossEntropyPaddedRejectsBadClassCounts(t *testing.T) {
	cpu := tensor.CPU()
	logits := tensor.Zeros(cpu, tensor.Float32, 2, 8)
	targets := tensor.FromInt32s(cpu, []int32{0, 5}, 2)
	for _, classes := range []int{0, 9} {
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

func TestCrossEntropyFusedRejects(t *testing.T) {
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
}

// UnaryTo gives exactly Unary's result cast to the half type, on every
// device, for every op of the table (inputs in every op's domain).
func TestUnaryToMatchesUnaryThenCast(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 9))
	v := make([]float64, 4099) // not a multiple of the kernel's 4-element packs
	for i := range v {
		v[i] = 0.05 + 3*rng.Float64()
	}
	onDevices(t, func(t *testing.T, dev tensor.Device) {
		tensor.WithScope(func() { // released before the next test measures memory
			x := tensor.FromFloat64s(dev, v, len(v)).To(tensor.Float32)
			for op := tensor.UnaryOp(0); op < tensor.NumUnaryOps; op++ {
				for _, half := range []tensor.DType{tensor.Float16, tensor.BFloat16} {
					got := tensor.UnaryTo(op, x, half)
					require.Equal(t, half, got.DType())
					want := tensor.Unary(op, x).To(half)
					require.Equal(t, want.Float64s(), got.Float64s(), "%v to %v on %v", op, half, dev)
				}
			}
			// An offset view (unaligned for the packs) and the rejections.
			odd := x.Narrow(0, 1, 4098)
			require.Equal(t, tensor.Gelu(odd).To(tensor.BFloat16).Float64s(), tensor.UnaryTo(tensor.OpGelu, odd, tensor.BFloat16).Float64s())
			require.ErrorIs(t, tensor.Try(func() { tensor.UnaryTo(tensor.OpGelu, x.To(tensor.Float64), tensor.BFloat16) }), tensor.ErrDType)
			require.ErrorIs(t, tensor.Try(func() { tensor.UnaryTo(tensor.OpGelu, x, tensor.Int32) }), tensor.ErrDType)
		})
	})
}

// The epilogue products in half precision with float32 results (autocast's
// products) agree with the composed ops on every device: the bias added
// to the float32 product, the row sums of the half operand in float32.
func TestMatMulEpiloguesHalf(t *testing.T) {
	rng := rand.New(rand.NewPCG(10, 11))
	randn := func(dev tensor.Device, shape ...int) *tensor.Tensor {
		n := 1
		for _, s := range shape {
			n *= s
		}
		v := make([]float64, n)
		for i := range v {
			v[i] = rng.NormFloat64()
		}
		return tensor.FromFloat64s(dev, v, shape...).To(tensor.Float32)
	}
	onDevices(t, func(t *testing.T, dev tensor.Device) {
		tensor.WithScope(func() { // released before the next test measures memory
			mode := tensor.MatMulMode{Float32Out: true}
			for _, half := range []tensor.DType{tensor.BFloat16, tensor.Float16} {
				x, w, g := randn(dev, 64, 768).To(half), randn(dev, 2304, 768).To(half), randn(dev, 64, 2304).To(half)
				b := randn(dev, 2304)
				y := tensor.MatMulBias(x, w.T(), b, mode)
				require.Equal(t, tensor.Float32, y.DType())
				want := tensor.Add(tensor.MatMulWith(x, w.T(), 1, mode), b)
				requireClose(t, want.Float64s(), y.Float64s(), 1e-5, "%v bias on %v", half, dev)
				gw, gb := tensor.MatMulRowSums(g.T(), x, mode)
				require.Equal(t, []int{2304}, gb.Shape())
				requireClose(t, tensor.MatMulWith(g.T(), x, 1, mode).Float64s(), gw.Float64s(), 1e-5, "%v weight gradient on %v", half, dev)
				requireClose(t, tensor.Sum(g.To(tensor.Float32), false, 0).Float64s(), gb.Float64s(), 1e-5, "%v bias gradient on %v", half, dev)
			}
		})
	})
}

// requireClose checks |got - want| <= tol (|want| + 1) element by element.
func requireClose(t *testing.T, want, got []float64, tol float64, msg string, args ...any) {
	t.Helper()
	require.Len(t, got, len(want))
	for i := range want {
		if math.Abs(got[i]-want[i]) > tol*(math.Abs(want[i])+1) {
			t.Fatalf("%s: element %d is %g, want %g", fmt.Sprintf(msg, args...), i, got[i], want[i])
		}
	}
}
