package cpukern

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// halfValue decodes binary16 bits from the definition.
func halfValue(h uint16) float64 {
	sign := 1.0
	if h&0x8000 != 0 {
		sign = -1
	}
	e, m := int(h>>10&0x1f), float64(h&0x3ff)
	switch e {
	case 0:
		return sign * math.Ldexp(m, -24)
	case 31:
		if m != 0 {
			return math.NaN()
		}
		return sign * math.Inf(1)
	}
	return sign * math.Ldexp(1+m/1024, e-15)
}

func TestF16ToF32Exhaustive(t *testing.T) {
	src := make([]uint16, 1<<16)
	for i := range src {
		src[i] = uint16(i)
	}
	dst := make([]float32, len(src))
	F16ToF32(dst, src)
	for i, h := range src {
		want := halfValue(h)
		if math.IsNaN(want) {
			require.True(t, dst[i] != dst[i], "half %#04x", h)
			continue
		}
		require.Equal(t, want, float64(dst[i]), "half %#04x", h)
		require.Equal(t, h&0x8000 != 0, math.Signbit(float64(dst[i])), "sign of half %#04x", h)
	}
}

// requireNearestEven checks that bits h is a correctly rounded encoding of
// x given a decoder and the previous/next encodings of the same sign.
func requireNearestEven(t *testing.T, name string, x float32, h uint16, decode func(uint16) float64, maxFinite uint16) {
	t.Helper()
	v := float64(x)
	got := decode(h)
	mag := h & 0x7fff
	if math.IsInf(got, 0) {
		require.GreaterOrEqual(t, math.Abs(v), decode(maxFinite)+(decode(maxFinite)-decode(maxFinite-1))/2, "%s(%v) overflowed", name, x)
		return
	}
	err := math.Abs(v - got)
	for _, nb := range []uint16{mag - 1, mag + 1} {
		if nb > maxFinite || mag == 0 && nb == 0xffff {
			continue
		}
		alt := math.Copysign(decode(nb), got)
		if math.Signbit(v) != math.Signbit(got) && got != 0 {
			t.Fatalf("%s(%v) = %v has the wrong sign", name, x, got)
		}
		d := math.Abs(v - alt)
		require.LessOrEqual(t, err, d, "%s(%v) = %v but %v is nearer", name, x, got, alt)
		if err == d {
			require.Zero(t, mag&1, "%s(%v): tie not rounded to even", name, x)
		}
	}
}

func bf16Value(h uint16) float64 { return float64(math.Float32frombits(uint32(h) << 16)) }

func castInputs() []float32 {
	r := newRNG(8)
	var xs []float32
	for i := 0; i < 200000; i++ {
		// Log-uniform magnitudes across both formats' ranges.
		x := float32(math.Ldexp(1+r.Float64(), r.IntN(80)-40))
		if r.IntN(2) == 0 {
			x = -x
		}
		xs = append(xs, x)
	}
	// Exact ties between neighbouring halves and bfloat16 values.
	for h := uint16(1); h < 0x7bff; h += 37 {
		xs = append(xs, float32((halfValue(h)+halfValue(h+1))/2))
		xs = append(xs, float32((bf16Value(h)+bf16Value(h+1))/2))
	}
	return append(xs, 0, float32(math.Copysign(0, -1)), 65504, 65519, 65520, 1e-8, 6e-8, math.MaxFloat32)
}

func TestF32ToF16RoundsToNearestEven(t *testing.T) {
	xs := castInputs()
	h := make([]uint16, len(xs))
	F32ToF16(h, xs)
	for i, x := range xs {
		requireNearestEven(t, "F32ToF16", x, h[i], halfValue, 0x7bff)
	}
	// Round trip of every finite half.
	src := make([]uint16, 0x7c00)
	for i := range src {
		src[i] = uint16(i)
	}
	f := make([]float32, len(src))
	F16ToF32(f, src)
	back := make([]uint16, len(src))
	F32ToF16(back, f)
	require.Equal(t, src, back)
	// Specials.
	F32ToF16(h[:3], []float32{float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN())})
	assert.Equal(t, []uint16{0x7c00, 0xfc00}, h[:2])
	assert.True(t, h[2]&0x7c00 == 0x7c00 && h[2]&0x3ff != 0, "NaN -> %#04x", h[2])
}

func TestF32ToBF16RoundsToNearestEven(t *testing.T) {
	xs := castInputs()
	h := make([]uint16, len(xs))
	F32ToBF16(h, xs)
	for i, x := range xs {
		requireNearestEven(t, "F32ToBF16", x, h[i], bf16Value, 0x7f7f)
	}
	back := make([]float32, len(h))
	BF16ToF32(back, h)
	for i := range h {
		require.Equal(t, bf16Value(h[i]), float64(back[i]))
	}
	// NaNs stay NaN, even those whose payload is only in the low bits
	// (plain rounding would turn 0x7f800001 into Inf).
	nans := []float32{math.Float32frombits(0x7f800001), math.Float32frombits(0xffffffff), float32(math.NaN())}
	F32ToBF16(h[:3], nans)
	for i := 0; i < 3; i++ {
		assert.True(t, h[i]&0x7f80 == 0x7f80 && h[i]&0x7f != 0, "NaN %#08x -> %#04x", math.Float32bits(nans[i]), h[i])
		assert.Equal(t, math.Float32bits(nans[i])>>31, uint32(h[i]>>15), "NaN sign")
	}
	F32ToBF16(h[:2], []float32{float32(math.Inf(-1)), math.MaxFloat32})
	assert.Equal(t, []uint16{0xff80, 0x7f80}, h[:2], "-Inf stays, MaxFloat32 rounds to Inf")
}

func TestConvert(t *testing.T) {
	f64 := []float64{0, -0.5, 1.5, 2.7, -2.7, 1e10, -1e10, math.NaN(), math.Inf(1), math.Inf(-1), 3.4e38 * 10, 123456789.123}
	i32 := make([]int32, len(f64))
	Convert(i32, f64)
	assert.Equal(t, []int32{0, 0, 1, 2, -2, math.MaxInt32, math.MinInt32, 0, math.MaxInt32, math.MinInt32, math.MaxInt32, 123456789}, i32)
	f32 := make([]float32, len(f64))
	Convert(f32, f64)
	for i, v := range f64 {
		if v != v {
			assert.True(t, f32[i] != f32[i])
			continue
		}
		assert.Equal(t, float32(v), f32[i])
	}
	back := make([]float64, len(f32))
	Convert(back, f32)
	for i := range f32 {
		if f32[i] == f32[i] {
			assert.Equal(t, float64(f32[i]), back[i])
		}
	}
	ints := []int32{math.MinInt32, -1, 0, 16777217, math.MaxInt32}
	fl := make([]float32, len(ints))
	Convert(fl, ints)
	assert.Equal(t, []float32{-2147483648, -1, 0, 16777216, 2147483648}, fl)
	same := make([]int32, len(ints))
	Convert(same, ints)
	assert.Equal(t, ints, same)
	big := randSlice[float32](newRNG(1), 140001, -1e6, 1e6)
	bi := make([]int32, len(big))
	Convert(bi, big)
	for i, v := range big {
		require.Equal(t, int32(math.Trunc(float64(v))), bi[i])
	}
	type token int32
	tk := make([]token, 2)
	Convert(tk, []float64{3.9, -3.9})
	assert.Equal(t, []token{3, -3}, tk)
}
