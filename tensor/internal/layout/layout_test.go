package layout

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMerge(t *testing.T) {
	// A contiguous tensor is one dim.
	l, ok := Merge([]int{2, 3, 4}, []int{12, 4, 1})
	require.True(t, ok)
	assert.Equal(t, 1, l.NDim)
	assert.Equal(t, 24, l.Shape[0])
	assert.True(t, l.Contiguous(1))
	assert.Equal(t, 24, l.Numel())

	// A bias add over (4, 5, 6): (4*5, 6) with b broadcast along rows.
	l, ok = Merge([]int{4, 5, 6}, []int{30, 6, 1}, []int{0, 0, 1})
	require.True(t, ok)
	assert.Equal(t, 2, l.NDim)
	assert.Equal(t, []int{20, 6}, l.Shape[:2])
	assert.Equal(t, []int{6, 1}, l.Strides[0][:2])
	assert.Equal(t, []int{0, 1}, l.Strides[1][:2])
	assert.False(t, l.Contiguous(2))

	// Dims merge only where every operand is contiguous across them.
	l, _ = Merge([]int{4, 5, 6}, []int{30, 6, 1}, []int{0, 6, 1})
	assert.Equal(t, []int{4, 30}, l.Shape[:l.NDim])
	assert.Equal(t, []int{0, 1}, l.Strides[1][:2])

	// A transpose of (4, 6) stays two dims with strides (1, 4).
	l, _ = Merge([]int{6, 4}, []int{1, 6})
	assert.Equal(t, 2, l.NDim)
	assert.True(t, l.Transposed())
	assert.Equal(t, [2]int{1, 6}, [2]int{l.Strides[0][0], l.Strides[0][1]})
	assert.Equal(t, []int{0, 0}, l.Strides[1][:2], "a missing operand has zero strides")

	// Unit dims drop out; all-unit and 0-d shapes have no dims, one element.
	for _, shape := range [][]int{{1, 1}, {}} {
		l, ok = Merge(shape, make([]int, len(shape)))
		require.True(t, ok)
		assert.Equal(t, 0, l.NDim)
		assert.Equal(t, 1, l.Numel())
		assert.True(t, l.Contiguous(2))
	}

	// A zero dim: one dim of 0 elements, reaching nothing.
	l, ok = Merge([]int{3, 0, 4}, []int{4, 4, 1})
	require.True(t, ok)
	assert.Equal(t, 0, l.Numel())
	_, _, reach := l.Span(0, 5)
	assert.False(t, reach)

	// More than MaxDims dims that cannot merge.
	deep, str := make([]int, MaxDims+1), make([]int, MaxDims+1)
	for i := range deep {
		deep[i], str[i] = 2, 1<<(2*(MaxDims-i)) // every stride leaves a gap
	}
	_, ok = Merge(deep, str)
	assert.False(t, ok)
	l, ok = Merge(deep[1:], str[1:])
	assert.True(t, ok)
	assert.Equal(t, MaxDims, l.NDim)

	assert.Panics(t, func() { Merge([]int{2, 3}, []int{1}) })
	assert.Panics(t, func() { Merge([]int{2}, []int{1}, []int{1}, []int{1}) })
}

func TestSpan(t *testing.T) {
	l, _ := Merge([]int{5, 6}, []int{-6, -1}, []int{6, 1})
	lo, hi, ok := l.Span(0, 29)
	assert.True(t, ok)
	assert.Equal(t, [2]int{0, 29}, [2]int{lo, hi})
	lo, hi, _ = l.Span(1, 2)
	assert.Equal(t, [2]int{2, 31}, [2]int{lo, hi})
}

func TestMergeDoesNotAllocate(t *testing.T) {
	shape, a, b := []int{8, 4, 16}, []int{64, 16, 1}, []int{0, 16, 1}
	var sink int
	assert.Zero(t, testing.AllocsPerRun(20, func() {
		l, _ := Merge(shape, a, b)
		sink += l.NDim
	}))
	_ = sink
}

// TestMergeEmptyDeepShape: a shape with a zero dim is the one dim 0
// however many dims it has, even when more than MaxDims of them would
// not merge.
func TestMergeEmptyDeepShape(t *testing.T) {
	deep, str := make([]int, MaxDims+2), make([]int, MaxDims+2)
	for i := range deep {
		deep[i], str[i] = 2, 1<<(2*(MaxDims+1-i)) // every stride leaves a gap
	}
	deep[0] = 0
	l, ok := Merge(deep, str, str)
	require.True(t, ok, "an empty shape has no dims left to merge")
	assert.Equal(t, 1, l.NDim)
	assert.Equal(t, 0, l.Numel())
}
