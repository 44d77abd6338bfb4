package cpukern

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Known answers from Random123's tests/kat_vectors (philox4x32, 10 rounds):
// counter, key, expected output.
func TestPhilox4x32KnownAnswers(t *testing.T) {
	cases := []struct {
		ctr  [4]uint32
		key  [2]uint32
		want [4]uint32
	}{
		{[4]uint32{0, 0, 0, 0}, [2]uint32{0, 0}, [4]uint32{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
		{[4]uint32{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, [2]uint32{0xffffffff, 0xffffffff},
			[4]uint32{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
		{[4]uint32{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, [2]uint32{0xa4093822, 0x299f31d0},
			[4]uint32{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
	}
	for _, c := range cases {
		assert.Equal(t, c.want, Philox4x32(c.ctr, c.key), "ctr %x key %x", c.ctr, c.key)
	}
}

func TestDropoutMaskDefinition(t *testing.T) {
	seed := uint64(0x0123456789abcdef)
	for _, offset := range []uint64{0, 1, 3, 4, 1<<34 + 2, math.MaxUint64 - 5} {
		for i := 0; i < 10; i++ {
			n := offset + uint64(i)
			blk := Philox4x32([4]uint32{uint32(n / 4), uint32(n / 4 >> 32), 0, 0}, [2]uint32{0x89abcdef, 0x01234567})
			assert.Equal(t, blk[n%4], DropoutMask(seed, offset, i), "offset %d i %d", offset, i)
		}
	}
}

func TestDropout(t *testing.T) {
	testDropout[float32](t)
	testDropout[float64](t)
}

func testDropout[T Float](t *testing.T) {
	for _, n := range []int{1, 3, 4, 5, 17, 1000, 50001} {
		for _, offset := range []uint64{0, 1, 2, 3, 1 << 33} {
			const p, seed = 0.3, 1234
			r := newRNG(uint64(n))
			src := randSlice[T](r, n, -1, 1)
			dst := make([]T, n)
			Dropout(dst, src, p, seed, offset)
			scale := T(1 / (1 - p))
			for i := range dst {
				u := float64(DropoutMask(seed, offset, i)) * 0x1p-32
				want := src[i] * scale
				if u < p {
					want = 0
				}
				require.Equal(t, want, dst[i], "n %d offset %d element %d", n, offset, i)
			}
			// A sub-range at the matching offset gives the same slice: what
			// the parallel split and the GPU kernels rely on.
			if n > 10 {
				part := make([]T, n-7)
				Dropout(part, src[7:], p, seed, offset+7)
				require.Equal(t, dst[7:], part)
			}
			// Backward: the same call on dy.
			Dropout(src, src, p, seed, offset)
			require.Equal(t, dst, src)
		}
	}
}

func TestDropoutKeepRate(t *testing.T) {
	const n = 1 << 20
	src := make([]float32, n)
	Fill(src, 1)
	for _, p := range []float64{0.1, 0.5, 0.9} {
		dst := make([]float32, n)
		Dropout(dst, src, p, 99, 0)
		kept := 0
		for _, v := range dst {
			if v != 0 {
				kept++
				require.Equal(t, float32(1/(1-p)), v)
			}
		}
		// Binomial: within 5 standard deviations.
		sd := math.Sqrt(n * p * (1 - p))
		assert.InDelta(t, n*(1-p), float64(kept), 5*sd, "p %v", p)
	}
	// Different seeds and offsets give different masks.
	a, b := make([]float32, 64), make([]float32, 64)
	Dropout(a, src[:64], 0.5, 1, 0)
	Dropout(b, src[:64], 0.5, 2, 0)
	assert.NotEqual(t, a, b)
	Dropout(b, src[:64], 0.5, 1, 64)
	assert.NotEqual(t, a, b)
}

func TestDropoutEdgeProbabilities(t *testing.T) {
	src := []float32{1, 2, 3}
	dst := make([]float32, 3)
	Dropout(dst, src, 0, 1, 0)
	assert.Equal(t, src, dst)
	Dropout(dst, src, 1, 1, 0)
	assert.Equal(t, []float32{0, 0, 0}, dst)
	assert.Equal(t, uint64(0), dropoutThreshold(0))
	assert.Equal(t, uint64(1<<31), dropoutThreshold(0.5))
	for _, p := range []float64{-0.1, 1.5, math.NaN()} {
		assert.Panics(t, func() { Dropout(dst, src, p, 1, 0) }, "p %v", p)
	}
}
