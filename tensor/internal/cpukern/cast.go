package cpukern

import (
	"math"

	"github.com/x448/float16"
)

// F32ToF16 converts to IEEE 754 binary16 bits, rounding to nearest even;
// overflow gives Inf, NaN stays NaN. It panics when lengths differ.
func F32ToF16(dst []uint16, src []float32) {
	mustEq("F32ToF16", "src", len(src), len(dst))
	if serial(len(dst), grainMem) {
		f32ToF16Range(dst, src)
		return
	}
	ParallelFor(len(dst), grainMem, func(lo, hi int) { f32ToF16Range(dst[lo:hi], src[lo:hi]) })
}

func f32ToF16Range(dst []uint16, src []float32) {
	src = src[:len(dst)]
	for i, v := range src {
		dst[i] = uint16(float16.Fromfloat32(v))
	}
}

// F16ToF32 widens binary16 bits to float32 (exact).
func F16ToF32(dst []float32, src []uint16) {
	mustEq("F16ToF32", "src", len(src), len(dst))
	if serial(len(dst), grainMem) {
		f16ToF32Range(dst, src)
		return
	}
	ParallelFor(len(dst), grainMem, func(lo, hi int) { f16ToF32Range(dst[lo:hi], src[lo:hi]) })
}

func f16ToF32Range(dst []float32, src []uint16) {
	src = src[:len(dst)]
	for i, h := range src {
		dst[i] = float16.Frombits(h).Float32()
	}
}

// F32ToBF16 converts to bfloat16 bits (the top half of a float32),
// rounding to nearest even; a NaN keeps its sign and top payload bits and
// gets the quiet bit, so it can never round into Inf.
func F32ToBF16(dst []uint16, src []float32) {
	mustEq("F32ToBF16", "src", len(src), len(dst))
	if serial(len(dst), grainMem) {
		f32ToBF16Range(dst, src)
		return
	}
	ParallelFor(len(dst), grainMem, func(lo, hi int) { f32ToBF16Range(dst[lo:hi], src[lo:hi]) })
}

func f32ToBF16Range(dst []uint16, src []float32) {
	src = src[:len(dst)]
	for i, v := range src {
		dst[i] = bf16FromBits(math.Float32bits(v))
	}
}

// bf16FromBits rounds float32 bits to bfloat16 bits: adding 0x7FFF plus
// the lowest kept bit rounds half to even, and a carry out of the
// mantissa correctly bumps the exponent (up to Inf for the largest
// values).
func bf16FromBits(b uint32) uint16 {
	if b&0x7FFFFFFF > 0x7F800000 { // NaN
		return uint16(b>>16) | 0x0040
	}
	return uint16((b + 0x7FFF + (b>>16)&1) >> 16)
}

// BF16ToF32 widens bfloat16 bits to float32 (exact).
func BF16ToF32(dst []float32, src []uint16) {
	mustEq("BF16ToF32", "src", len(src), len(dst))
	if serial(len(dst), grainMem) {
		bf16ToF32Range(dst, src)
		return
	}
	ParallelFor(len(dst), grainMem, func(lo, hi int) { bf16ToF32Range(dst[lo:hi], src[lo:hi]) })
}

func bf16ToF32Range(dst []float32, src []uint16) {
	src = src[:len(dst)]
	for i, h := range src {
		dst[i] = math.Float32frombits(uint32(h) << 16)
	}
}
