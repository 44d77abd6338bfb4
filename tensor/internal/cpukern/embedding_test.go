package cpukern

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestGatherScatterAdd(t *testing.T) {
	testGatherScatter[float32](t)
	testGatherScatter[float64](t)
}

func testGatherScatter[T Float](t *testing.T) {
	for _, c := range [][3]int{{1, 1, 1}, {7, 3, 5}, {64, 128, 256}, {2048, 128, 100}, {1000, 384, 3}} {
		n, dim, rows := c[0], c[1], c[2]
		t.Run(shapeName(n, dim, rows)+"/"+dtypeName[T](), func(t *testing.T) {
			r := newRNG(uint64(n + dim))
			table := randSlice[T](r, rows*dim, -1, 1)
			ids := make([]int32, n)
			for i := range ids {
				ids[i] = int32(r.IntN(rows))
			}
			dst := make([]T, n*dim)
			require.NoError(t, Gather(dst, table, ids, dim, rows))
			for i, id := range ids {
				require.Equal(t, table[int(id)*dim:(int(id)+1)*dim], dst[i*dim:(i+1)*dim], "row %d", i)
			}
			dout := randSlice[T](r, n*dim, -1, 1)
			dtable := randSlice[T](r, rows*dim, -1, 1)
			want := to64(dtable)
			for i, id := range ids { // serial reference, in order of i
				for j := 0; j < dim; j++ {
					want[int(id)*dim+j] = float64(T(want[int(id)*dim+j]) + dout[i*dim+j])
				}
			}
			require.NoError(t, ScatterAdd(dtable, dout, ids, dim, rows))
			requireClose(t, "dtable", dtable, want, 0, 0) // bit-exact: same order
			// Adjointness: <Gather(table), dout> = <table, ScatterAdd(dout)>.
			if !isF32[T]() {
				g := make([]T, rows*dim)
				require.NoError(t, ScatterAdd(g, dout, ids, dim, rows))
				assert.InDelta(t, dot(dst, dout), dot(table, g), 1e-9)
			}
		})
	}
}

func TestGatherAnyType(t *testing.T) {
	table := []int32{10, 11, 20, 21, 30, 31}
	dst := make([]int32, 4)
	require.NoError(t, Gather(dst, table, []int32{2, 0}, 2, 3))
	assert.Equal(t, []int32{30, 31, 10, 11}, dst)
}

func TestGatherBadIDs(t *testing.T) {
	table := make([]float32, 6)
	dst := []float32{9, 9, 9, 9}
	err := Gather(dst, table, []int32{1, 3}, 2, 3)
	require.Error(t, err)
	assert.True(t, errors.Is(err, ErrIndex))
	assert.Equal(t, "cpukern: index out of range: cpukern.Gather: ids[1] = 3, table has 3 rows", err.Error())
	assert.Equal(t, []float32{9, 9, 9, 9}, dst, "dst written despite the error")
	err = ScatterAdd(table, dst, []int32{-2, 0}, 2, 3)
	assert.ErrorIs(t, err, ErrIndex)
	assert.ErrorContains(t, err, "ids[0] = -2")
	assert.Equal(t, make([]float32, 6), table)
	assert.PanicsWithValue(t, "cpukern.Gather: dst has 3 elements, want 4", func() { _ = Gather(dst[:3], table, []int32{0, 1}, 2, 3) })
}
