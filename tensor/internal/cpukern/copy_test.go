package cpukern

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var copyLayouts = []struct {
	name  string
	shape []int
	v     view
}{
	{"contiguous", []int{3, 4, 5}, view{0, []int{20, 5, 1}}},
	{"offset-rows", []int{5, 7}, view{3, []int{10, 1}}},
	{"transpose", []int{33, 65}, view{0, []int{1, 33}}},
	{"transpose-big", []int{512, 384}, view{0, []int{1, 512}}},
	{"batched-transpose", []int{2, 3, 40, 24}, view{0, []int{2880, 960, 1, 40}}},
	{"bhtd-to-bthd", []int{2, 7, 4, 16}, view{0, []int{448, 16, 112, 1}}},
	{"strided-inner", []int{4, 6}, view{1, []int{13, 2}}},
	{"negative", []int{4, 5}, view{19, []int{-5, -1}}},
	{"broadcast", []int{3, 4}, view{2, []int{0, 1}}},
	{"column-broadcast", []int{5, 7}, view{1, []int{1, 0}}},
	{"scalar", []int{}, view{4, []int{}}},
	{"empty", []int{0, 3}, view{0, []int{3, 1}}},
	{"parallel-rows", []int{1000, 300}, view{0, []int{301, 1}}},
	{"parallel-1d", []int{140001}, view{1, []int{2}}},
}

func TestCopyStrided(t *testing.T) {
	for li, l := range copyLayouts {
		t.Run(l.name, func(t *testing.T) {
			src := make([]int32, l.v.span(l.shape)+3)
			for i := range src {
				src[i] = int32(i*7 + li)
			}
			offs := viewOffsets(l.shape, l.v.off, l.v.strides)
			want := make([]int32, len(offs))
			for i, o := range offs {
				want[i] = src[o]
			}
			dst := make([]int32, len(offs))
			CopyStrided(dst, merged(l.shape, l.v.strides), src, l.v.off)
			require.Equal(t, want, dst)
			f := randSlice[float64](newRNG(uint64(li)), len(src), -1, 1)
			fd := make([]float64, len(offs))
			CopyStrided(fd, merged(l.shape, l.v.strides), f, l.v.off)
			for i, o := range offs {
				require.Equal(t, f[o], fd[i])
			}
		})
	}
	assert.PanicsWithValue(t, "cpukern.CopyStrided: src view (offset 1, strides [1], shape [6]) spans [1, 6], outside its 6 elements", func() {
		CopyStrided(make([]int32, 6), merged([]int{2, 3}, []int{3, 1}), make([]int32, 6), 1)
	})
	assert.PanicsWithValue(t, "cpukern.CopyStrided: src view (offset 0, strides [3 1], shape [2 2]) spans [0, 4], outside its 4 elements", func() {
		CopyStrided(make([]int32, 4), merged([]int{2, 2}, []int{3, 1}), make([]int32, 4), 0)
	})
}

func TestFillArange(t *testing.T) {
	for _, n := range []int{0, 1, 2, 3, 1000, 4097} {
		x := make([]float32, n)
		Fill(x, 2.5)
		for _, v := range x {
			require.Equal(t, float32(2.5), v)
		}
		s := make([]string, n)
		Fill(s, "a")
		for _, v := range s {
			require.Equal(t, "a", v)
		}
	}
	f := make([]float32, 1000)
	Arange(f, 0.1, 0.3)
	for i, v := range f {
		// One rounding of the exact float64 expression: no drift.
		require.Equal(t, float32(float64(float32(0.1))+float64(i)*float64(float32(0.3))), v, "element %d", i)
	}
	d := make([]int32, 5)
	Arange(d, 7, -3)
	assert.Equal(t, []int32{7, 4, 1, -2, -5}, d)
}

func TestScaleAddScalarAxpy(t *testing.T) {
	testScale[float32](t)
	testScale[float64](t)
}

func testScale[T Float](t *testing.T) {
	for _, n := range []int{0, 1, 5, 1000, 140001} {
		r := newRNG(uint64(n))
		x := randSlice[T](r, n, -2, 2)
		y := randSlice[T](r, n, -2, 2)
		want := make([]float64, n)
		out := make([]T, n)
		Scale(out, x, 1.5)
		for i := range x {
			want[i] = float64(T(1.5) * x[i])
		}
		requireClose(t, "Scale", out, want, 0, 0)
		AddScalar(out, x, -0.25)
		for i := range x {
			want[i] = float64(x[i] - 0.25)
		}
		requireClose(t, "AddScalar", out, want, 0, 0)
		for _, alpha := range []T{1, -0.5} {
			acc := append([]T(nil), y...)
			Axpy(acc, alpha, x)
			for i := range x {
				want[i] = float64(y[i] + alpha*x[i])
			}
			requireClose(t, "Axpy", acc, want, 0, 0)
		}
	}
}
