package tensor

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/cuda"
	"github.com/strata-ml/strata/tensor/internal/layout"
)

// widenLayout folds 16 bytes of elements into one word only when every
// row is a contiguous run of whole words at aligned addresses.
func TestWidenLayout(t *testing.T) {
	merge := func(shape []int, strides []int) layout.Layout {
		l, ok := layout.Merge(shape, strides)
		require.True(t, ok)
		return l
	}
	// The attention's head split: (B, H, T, hd) from (B, T, H, hd).
	split := merge([]int{2, 3, 5, 64}, []int{960, 64, 192, 1})
	w, ok := widenLayout(split, 4, 0, 4096)
	require.True(t, ok)
	require.Equal(t, []int{2, 3, 5, 16}, w.Shape[:w.NDim])
	require.Equal(t, []int{240, 16, 48, 1}, w.Strides[0][:w.NDim])
	w, ok = widenLayout(split, 2, 0, 4096) // the same strides in halves: 8 a word
	require.True(t, ok)
	require.Equal(t, []int{2, 3, 5, 8}, w.Shape[:w.NDim])

	for name, c := range map[string]struct {
		l        layout.Layout
		sz       int
		dst, src uintptr
	}{
		"row not a whole number of words": {merge([]int{2, 3, 5, 6}, []int{90, 6, 18, 1}), 4, 0, 0},
		"unaligned source":                {split, 4, 0, 4100},
		"unaligned destination":           {split, 4, 8, 0},
		"inner stride not 1":              {merge([]int{8, 8}, []int{1, 8}), 4, 0, 0},
		"outer stride not whole words":    {merge([]int{3, 8}, []int{10, 1}), 4, 0, 0},
		"8-byte elements in 16 bytes":     {merge([]int{3, 2}, []int{5, 1}), 8, 0, 0},
	} {
		if name == "8-byte elements in 16 bytes" {
			_, ok := widenLayout(c.l, c.sz, 0, 0)
			require.False(t, ok, "stride 5 is not a multiple of 2")
			continue
		}
		_, ok := widenLayout(c.l, c.sz, cuda.DevicePtr(c.dst), cuda.DevicePtr(c.src))
		require.False(t, ok, name)
	}
}

// rowBroadcast recognises (rows, cols) against a repeated (cols) row, in
// either operand, and nothing else.
func TestRowBroadcast(t *testing.T) {
	x, y := &Tensor{}, &Tensor{}
	l, _ := layout.Merge([]int{4, 8}, []int{8, 1}, []int{0, 1})
	full, row, swap, cols, ok := rowBroadcast(&l, x, y)
	require.True(t, ok)
	require.True(t, full == x && row == y && !swap && cols == 8)
	l, _ = layout.Merge([]int{4, 8}, []int{0, 1}, []int{8, 1})
	full, row, swap, _, ok = rowBroadcast(&l, x, y)
	require.True(t, ok)
	require.True(t, full == y && row == x && swap)
	for _, s := range [][2][]int{{{8, 1}, {1, 0}}, {{16, 1}, {0, 1}}, {{8, 1}, {0, 2}}} {
		l, _ = layout.Merge([]int{4, 8}, s[0], s[1])
		_, _, _, _, ok = rowBroadcast(&l, x, y)
		require.False(t, ok, "%v", s)
	}
}
