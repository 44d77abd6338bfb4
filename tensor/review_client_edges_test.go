package tensor_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/tensor"
)

// String prints a few values per axis and copies only those: a broadcast
// view of one value over 2^40 elements (or any large tensor) prints, where
// copying it whole panicked inside String (fmt showed "%!v(PANIC=String
// method: ... out of memory)") or doubled the memory of a large tensor.
func TestStringCopiesOnlyShownValues(t *testing.T) {
	tensor.WithScope(func() {
		one := tensor.FromFloat64s(cpu, []float64{2.5}, 1, 1)
		v := one.Expand(1<<20, 1<<20)
		var s string
		require.NoError(t, tensor.Try(func() { s = v.String() }))
		row := "[2.5, 2.5, 2.5, ..., 2.5, 2.5, 2.5]"
		rows := strings.Repeat(row+",\n ", 3) + "...,\n " + strings.Repeat(row+",\n ", 2) + row
		require.Equal(t, "Tensor(float64 [1048576 1048576] on cpu,\n["+rows+"])", s)
		require.Equal(t, s, fmt.Sprint(v))
	})
}

// String shows, for every shape, dtype and view, what printing all the
// values with the first and last 3 of each long axis gives (the old
// formatting, from a copy of every value).
func TestStringMatchesFullFormatting(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	shapes := [][]int{{}, {1}, {6}, {7}, {13}, {2, 7}, {7, 2}, {8, 9}, {3, 1, 8}, {7, 7, 7}, {2, 3, 4, 10}}
	tensor.WithScope(func() {
		for _, shape := range shapes {
			for _, dt := range []tensor.DType{tensor.Float32, tensor.Float64, tensor.BFloat16, tensor.Int32} {
				x := tensor.RandN(cpu, tensor.Float64, rng, 100, shape...)
				if len(shape) == 0 {
					x = x.Reshape()
				}
				views := map[string]*tensor.Tensor{"plain": x.To(dt)}
				if len(shape) >= 2 {
					views["transposed"] = x.To(dt).T()
				}
				for name, v := range views {
					require.Equal(t, fullFormat(v), v.String(), "%v %v %s", dt, shape, name)
				}
			}
		}
	})
}

// fullFormat is String as it was: every value copied, the elided ones
// skipped while printing.
func fullFormat(t *tensor.Tensor) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Tensor(%v %v on %v", t.DType(), t.Shape(), t.Device())
	if t.Numel() == 0 {
		return b.String() + ", empty)"
	}
	verb := "%.4g"
	if !t.DType().IsFloat() {
		verb = "%.0f"
	}
	b.WriteString(",\n")
	var rec func(vals []float64, shape []int, indent int)
	rec = func(vals []float64, shape []int, indent int) {
		if len(shape) == 0 {
			fmt.Fprintf(&b, verb, vals[0])
			return
		}
		n, inner := shape[0], 1
		for _, d := range shape[1:] {
			inner *= d
		}
		sep := ", "
		if len(shape) > 1 {
			sep = ",\n" + strings.Repeat(" ", indent+1)
		}
		b.WriteString("[")
		for i := range n {
			if n > 6 && i > 2 && i < n-3 {
				if i == 3 {
					b.WriteString("..." + sep)
				}
				continue
			}
			rec(vals[i*inner:(i+1)*inner], shape[1:], indent+1)
			if i < n-1 {
				b.WriteString(sep)
			}
		}
		b.WriteString("]")
	}
	rec(t.Float64s(), t.Shape(), 0)
	return b.String() + ")"
}

// A view counts its bytes in an int64 (Bytes) as any tensor does: Expand
// refuses a shape of more bytes than memory can address, as New does,
// where it made a view of 2^62 float64 values whose Bytes() was 0.
func TestExpandRefusesMoreBytesThanAddressable(t *testing.T) {
	tensor.WithScope(func() {
		one := tensor.Zeros(cpu, tensor.Float64, 1)
		err := tensor.Try(func() { one.Expand(1 << 62) })
		require.ErrorIs(t, err, tensor.ErrShape)
		require.ErrorContains(t, err, "tensor.Expand")
		require.ErrorContains(t, err, "more bytes than memory can address")
		// The largest addressable view is still a view.
		f := tensor.Zeros(cpu, tensor.Float32, 1).Expand(1 << 60)
		require.Equal(t, int64(1)<<62, f.Bytes())
	})
}

// Concat of broadcast views whose lengths add up past what an int holds
// is refused by Concat, naming the problem, where the wrapped-around
// length made a tensor of 0 elements and WriteNarrow then failed with
// "cannot write ... along axis 0 of [0]".
func TestConcatRefusesLengthOverflow(t *testing.T) {
	tensor.WithScope(func() {
		v := tensor.Zeros(cpu, tensor.Float32, 1).Expand(1 << 60)
		ts := make([]*tensor.Tensor, 16)
		for i := range ts {
			ts[i] = v
		}
		err := tensor.Try(func() { tensor.Concat(0, ts...) })
		require.ErrorIs(t, err, tensor.ErrShape)
		var oe *tensor.OpError
		require.True(t, errors.As(err, &oe))
		require.Equal(t, "Concat", oe.Op)
		require.ErrorContains(t, err, "more elements than memory can address")
	})
}

// Arange refuses values past the int range, for every dtype (int32
// already refused values past its own), where start+i wrapped around:
// Arange(Float64, MaxInt, 2) gave [9.2e18, -9.2e18].
func TestArangeRefusesIntOverflow(t *testing.T) {
	tensor.WithScope(func() {
		for _, dt := range []tensor.DType{tensor.Float64, tensor.Float32, tensor.Int32} {
			err := tensor.Try(func() { tensor.Arange(cpu, dt, math.MaxInt, 2) })
			require.ErrorIs(t, err, tensor.ErrArgument, "%v", dt)
		}
		require.Equal(t, []float64{math.MaxInt - 1, math.MaxInt}, tensor.Arange(cpu, tensor.Float64, math.MaxInt-1, 2).Float64s())
		require.Equal(t, 0, tensor.Arange(cpu, tensor.Float64, math.MaxInt, 0).Numel())
	})
}

// A shape whose element count overflows is reported as too many
// elements by the creation functions that compare it with their data,
// not as a shape of "0 elements" (the wrapped-around count) that the
// data does not fill.
func TestCreationFromDataOverflowingShape(t *testing.T) {
	tensor.WithScope(func() {
		for name, create := range map[string]func() error{
			"FromInt32s":   func() error { return tensor.Try(func() { tensor.FromInt32s(cpu, []int32{1}, 1<<32, 1<<32) }) },
			"FromFloat32s": func() error { return tensor.Try(func() { tensor.FromFloat32s(cpu, []float32{1}, 1<<32, 1<<32) }) },
			"FromFloats": func() error {
				return tensor.Try(func() { tensor.FromFloats(cpu, tensor.Float16, []float64{1}, 1<<32, 1<<32) })
			},
			"FromBytes": func() error {
				_, err := tensor.FromBytes(cpu, tensor.Float32, make([]byte, 4), 1<<32, 1<<32)
				return err
			},
		} {
			err := create()
			require.ErrorIs(t, err, tensor.ErrShape, name)
			require.ErrorContains(t, err, "too many elements", name)
			require.NotContains(t, err.Error(), "(0 elements)", name)
			require.NotContains(t, err.Error(), "want 0", name)
		}
		// Negative dimensions are named as such, before the count.
		err := tensor.Try(func() { tensor.FromFloat32s(cpu, []float32{1, 2}, -1, -2) })
		require.ErrorContains(t, err, "negative dimension")
	})
}

// WithScope, Tidy and WithRole with a nil function, and Adopt of a nil
// tensor, are *OpErrors wrapping ErrArgument (as Try(nil) is), not nil
// dereferences that Try passes on as bugs; Background's scopes are as
// they were.
func TestNilFunctionsAndTensorsAreOpErrors(t *testing.T) {
	c := tensor.NewCtx()
	for name, call := range map[string]func(){
		"WithScope":     func() { tensor.WithScope(nil) },
		"Ctx.WithScope": func() { c.WithScope(nil) },
		"Tidy":          func() { tensor.Tidy(nil) },
		"Ctx.Tidy":      func() { c.Tidy(nil) },
		"WithRole":      func() { tensor.WithRole(memory.RoleActivation, nil) },
		"Ctx.WithRole":  func() { c.WithRole(memory.RoleActivation, nil) },
		"Adopt":         func() { tensor.Adopt(nil) },
		"Ctx.Adopt":     func() { c.Adopt(nil) },
	} {
		before := tensor.CurrentRole()
		var err error
		require.NotPanics(t, func() { err = tensor.Try(call) }, name)
		require.ErrorIs(t, err, tensor.ErrArgument, name)
		require.Equal(t, before, tensor.CurrentRole(), name)
		require.Equal(t, before, c.Role(), name)
	}
	// Background has no scope left open: a tensor made now is no scope's.
	require.NotPanics(t, func() {
		tensor.WithScope(func() {
			s := tensor.NewScope()
			defer s.Close()
			x := tensor.Zeros(cpu, tensor.Float32, 1)
			require.Equal(t, 1, s.Len())
			x.Release()
		})
	})
}

// BroadcastShapes refuses negative dimensions (PyTorch's broadcast_shapes
// does too), where [-3] and [1] broadcast to [-3].
func TestBroadcastShapesRefusesNegative(t *testing.T) {
	for _, c := range [][2][]int{{{-3}, {1}}, {{1}, {-3}}, {{2, -1}, {2, 1}}, {{-1}, {-1}}} {
		out, err := tensor.BroadcastShapes(c[0], c[1])
		require.ErrorIs(t, err, tensor.ErrShape, "%v %v", c[0], c[1])
		require.ErrorContains(t, err, "negative dimension")
		require.Nil(t, out)
	}
	out, err := tensor.BroadcastShapes([]int{0, 1}, []int{3, 1, 4})
	require.NoError(t, err)
	require.Equal(t, []int{3, 0, 4}, out)
}

// A StepGuard, AdamWArgs or Timer asked for on a nil device is an error
// wrapping ErrDevice where it is made or used, not a value whose first
// use dereferenced the nil device (Result, Spans, Mark); a guarded update
// without its constants is an *OpError.
func TestNilDeviceGuardsAndTimer(t *testing.T) {
	g, err := tensor.NewStepGuard(nil)
	require.ErrorIs(t, err, tensor.ErrDevice)
	require.Nil(t, g)
	a, err := tensor.NewAdamWArgs(nil)
	require.ErrorIs(t, err, tensor.ErrDevice)
	require.Nil(t, a)
	tm := tensor.NewTimer(nil)
	require.NotPanics(t, func() { err = tm.Mark("a") })
	require.ErrorIs(t, err, tensor.ErrDevice)
	require.NotPanics(t, func() { err = tm.Mark("b") })
	require.ErrorIs(t, err, tensor.ErrDevice)
	spans, err := tm.Spans()
	require.NoError(t, err)
	require.Empty(t, spans)
	require.NotPanics(t, func() {
		err = tensor.Try(func() { tensor.AdamWStepsGuarded(nil, nil, nil, nil, nil, nil, nil) })
	})
	require.ErrorIs(t, err, tensor.ErrArgument)
}

// To converts as To's doc says, with PyTorch 1.13's values where PyTorch
// defines them (torch.tensor(v, dtype=float64).half() and .bfloat16(),
// int32 to the halves, truncating float to int32); out of int32's range,
// and for NaN, where PyTorch gives -2147483648 (undefined behaviour in
// C++), it saturates and gives 0.
func TestToConversionsAsDocumented(t *testing.T) {
	inf := math.Inf(1)
	v := []float64{1e6, -1e6, 65504, 65519.99, 65520, 1e-8, 6e-8, 3.0e38, 1e300, 1 + 0x1p-11 + 0x1p-40, -2.5, 0.1}
	tensor.WithScope(func() {
		x := tensor.FromFloat64s(cpu, v)
		require.Equal(t, []float64{inf, -inf, 65504, 65504, inf, 0, 5.960464477539063e-08, inf, inf, 1, -2.5, 0.0999755859375},
			x.To(tensor.Float16).Float64s())
		require.Equal(t, []float64{999424, -999424, 65536, 65536, 65536, 1.0011717677116394e-08, 6.007030606269836e-08, 3.00405527047391e+38, inf, 1, -2.5, 0.10009765625},
			x.To(tensor.BFloat16).Float64s())
		ids := tensor.FromInt32s(cpu, []int32{1<<24 + 65537, math.MaxInt32, math.MinInt32, 65519, 65520})
		require.Equal(t, []float64{16777216, 2147483648, -2147483648, 65536, 65536}, ids.To(tensor.BFloat16).Float64s())
		require.Equal(t, []float64{inf, inf, -inf, 65504, inf}, ids.To(tensor.Float16).Float64s())
		f := tensor.FromFloat32s(cpu, []float32{2.7, -2.7, 2147483520, -0.5, 3e9, -3e9, float32(math.NaN()), float32(inf), float32(-inf)})
		require.Equal(t, []int32{2, -2, 2147483520, 0, math.MaxInt32, math.MinInt32, 0, math.MaxInt32, math.MinInt32}, f.To(tensor.Int32).Int32s())
	})
}
