package tensor_test

import (
	"errors"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/tensor"
)

// Edge cases of the CPU ops, each checked against values computed here
// (float64) or PyTorch's documented semantics.

// AddInPlace with a source that overlaps the destination in another
// place (x[1:] += x[:-1]) must add the source's values from before the
// op: the element-wise kernel may write an element before it reads it.
func TestAddInPlaceOverlappingSource(t *testing.T) {
	tensor.WithScope(func() {
		x := tensor.FromFloat64s(cpu, []float64{1, 2, 3, 4, 5})
		x.Narrow(0, 1, 4).AddInPlace(x.Narrow(0, 0, 4))
		require.Equal(t, []float64{1, 3, 5, 7, 9}, x.Float64s())

		// The source a transposed view of the destination itself.
		m := tensor.FromFloat64s(cpu, []float64{1, 2, 3, 4}, 2, 2)
		m.AddInPlace(m.T())
		require.Equal(t, []float64{2, 5, 5, 8}, m.Float64s())

		// The same view: t += t doubles.
		d := tensor.FromFloat64s(cpu, []float64{1, 2, 3})
		d.AddInPlace(d)
		require.Equal(t, []float64{2, 4, 6}, d.Float64s())
	})
}

// WriteNarrow with a source that is a view of the destination's storage
// copies the source as it was before the write.
func TestWriteNarrowAliasedSource(t *testing.T) {
	tensor.WithScope(func() {
		base := tensor.FromFloat64s(cpu, seq(8))
		dst := base.Reshape(2, 4)
		src := base.Narrow(0, 0, 4).Reshape(2, 2) // [[0 1] [2 3]], contiguous
		dst.WriteNarrow(1, 2, src)
		require.Equal(t, []float64{0, 1, 0, 1, 4, 5, 2, 3}, base.Float64s())
	})
}

// CopyFrom with a strided source viewing the destination (t.CopyFrom(t.T()))
// copies the source's values from before the copy.
func TestCopyFromAliasedStridedSource(t *testing.T) {
	tensor.WithScope(func() {
		m := tensor.FromFloat64s(cpu, seq(9), 3, 3)
		m.CopyFrom(m.T())
		require.Equal(t, []float64{0, 3, 6, 1, 4, 7, 2, 5, 8}, m.Float64s())
	})
}

// Expand to a shape whose element count overflows is refused (PyTorch:
// "numel: integer multiplication overflow"), not a view whose Numel wraps
// around (2^32 * 2^32 reported 0 elements).
func TestExpandRefusesOverflowingShape(t *testing.T) {
	tensor.WithScope(func() {
		x := tensor.FromFloat64s(cpu, []float64{1}, 1, 1)
		for _, shape := range [][]int{{1 << 32, 1 << 32}, {7, 0x6DB6DB6DB6DB6DB7}} { // 2^64 and 1 mod 2^64
			err := tensor.Try(func() { x.Expand(shape...) })
			require.Error(t, err, "Expand(%v)", shape)
			require.True(t, errors.Is(err, tensor.ErrShape), "%v", err)
		}
		require.Equal(t, 1<<40, x.Expand(1<<20, 1<<20).Numel())
	})
}

// Full and Fill of int32 convert v as Cast does (truncate, saturate, NaN
// 0), not by Go's conversion, whose out-of-range result is unspecified
// (on amd64 3e9 became -2147483648).
func TestFullInt32SaturatesLikeCast(t *testing.T) {
	tensor.WithScope(func() {
		for _, v := range []float64{3e9, -3e9, 2147483648, math.Inf(1), math.Inf(-1), math.NaN(), 2.9, -2.9} {
			want := tensor.FromFloat64s(cpu, []float64{v}).To(tensor.Int32).Int32s()
			require.Equal(t, want, tensor.Full(cpu, tensor.Int32, v, 1).Int32s(), "Full(%v)", v)
		}
		require.Equal(t, []int32{math.MaxInt32}, tensor.Full(cpu, tensor.Int32, 3e9, 1).Int32s())
	})
}

// Split of an empty axis gives one empty piece, as torch.split does, so
// that Concat(axis, t.Split(size, axis)...) gives t back.
func TestSplitEmptyAxis(t *testing.T) {
	tensor.WithScope(func() {
		z := tensor.Zeros(cpu, tensor.Float32, 0, 3)
		parts := z.Split(2, 0)
		require.Len(t, parts, 1)
		require.Equal(t, []int{0, 3}, parts[0].Shape())
		require.Equal(t, []int{0, 3}, tensor.Concat(0, parts...).Shape())
	})
}

// Arange of int32 refuses values int32 cannot hold instead of wrapping
// them around (start 2^31-2, n 3 gave ..., -2^31; start 2^40 gave 0).
func TestArangeInt32Range(t *testing.T) {
	tensor.WithScope(func() {
		require.Equal(t, []int32{math.MaxInt32 - 1, math.MaxInt32}, tensor.Arange(cpu, tensor.Int32, math.MaxInt32-1, 2).Int32s())
		require.Equal(t, []int32{math.MinInt32, math.MinInt32 + 1}, tensor.Arange(cpu, tensor.Int32, math.MinInt32, 2).Int32s())
		require.Equal(t, []int{0}, tensor.Arange(cpu, tensor.Int32, 1<<40, 0).Shape())
		for _, c := range [][2]int{{math.MaxInt32 - 1, 3}, {1 << 40, 1}, {math.MinInt32 - 1, 2}, {math.MaxInt, 2}} {
			err := tensor.Try(func() { tensor.Arange(cpu, tensor.Int32, c[0], c[1]) })
			require.Error(t, err, "Arange(int32, %d, %d)", c[0], c[1])
			require.True(t, errors.Is(err, tensor.ErrArgument), "%v", err)
		}
	})
}

// TestShapeWhoseBytesOverflow: a shape whose element count is allowed but
// whose bytes overflow int64 (2^61 float64s) is refused, not backed by a
// wrapped-around, tiny allocation.
func TestShapeWhoseBytesOverflow(t *testing.T) {
	for _, dt := range []tensor.DType{tensor.Float64, tensor.Float32, tensor.Int32} {
		_, err := tensor.NewCtx().New(cpu, dt, memory.RoleActivation, 1<<61)
		require.ErrorIs(t, err, tensor.ErrShape, "%v", dt)
	}
	err := tensor.Try(func() { tensor.Empty(cpu, tensor.Float64, 1<<61) })
	require.ErrorIs(t, err, tensor.ErrShape)
}
