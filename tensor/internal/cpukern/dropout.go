package cpukern

import (
	"fmt"
	"math"
)

// dropoutThreshold returns t such that keeping element i iff
// uint64(DropoutMask(...)) >= t is the same as keeping it iff
// u >= p with u = DropoutMask(...) * 2^-32 in [0, 1) (both sides exact).
func dropoutThreshold(p float64) uint64 {
	return uint64(math.Ceil(p * 0x1p32))
}

// Dropout sets dst[i] = src[i] * (1/(1-p)) if element i is kept and
// src[i] * 0 if not, as PyTorch multiplies by its scaled mask: a
// dropped NaN or infinity gives NaN and a dropped negative -0, so a
// non-finite input shows in the output whichever elements are dropped.
// Element i is kept iff u >= p, u = DropoutMask(seed, offset, i) * 2^-32,
// i.e. with probability 1-p; the mask is a pure function of (seed,
// offset+i), so the backward pass is the same call on dy, no mask is
// stored, and successive calls advance offset by the element count to get
// fresh masks. p == 0 copies src; p == 1 multiplies it by 0. dst may be src
// itself. It panics when p is outside [0, 1] or lengths differ.
func Dropout[T Float](dst, src []T, p float64, seed, offset uint64) {
	mustEq("Dropout", "src", len(src), len(dst))
	if !(p >= 0 && p <= 1) {
		panic(fmt.Sprintf("cpukern.Dropout: p = %v, want a probability in [0, 1]", p))
	}
	switch p {
	case 0:
		copy(dst, src)
		return
	case 1:
		for i, v := range src {
			dst[i] = v * 0
		}
		return
	}
	thr := dropoutThreshold(p)
	scale := T(1 / (1 - p))
	if serial(len(dst), grainMath) {
		dropoutRange(dst, src, thr, scale, seed, offset)
		return
	}
	ParallelFor(len(dst), grainMath, func(lo, hi int) {
		dropoutRange(dst[lo:hi], src[lo:hi], thr, scale, seed, offset+uint64(lo))
	})
}

// dropoutRange applies the mask whose first element has stream position
// pos. One Philox block serves four consecutive positions; once pos is
// aligned, blocks are computed in interleaved pairs, eight elements at a
// time. The keep test is branch-free (a mispredicted branch per dropped
// element would cost more than the arithmetic): (word - thr) >> 63 is 1
// exactly when word < thr, and the value is multiplied by scale times 1
// minus it.
func dropoutRange[T Float](dst, src []T, thr uint64, scale T, seed, pos uint64) {
	if isF32[T]() {
		dropout32(f32(dst), f32(src), thr, float32(scale), seed, pos)
		return
	}
	dropout64(f64(dst), f64(src), thr, float64(scale), seed, pos)
}

// keep32 returns v times scale when word >= thr, else v times 0: the
// factor is chosen before v is multiplied, as PyTorch multiplies by its
// scaled mask, so a dropped finite v whose scaled value would overflow is
// 0, not inf * 0 = NaN.
func keep32(v, scale float32, word uint32, thr uint64) float32 {
	return v * (scale * float32(int32(1-(uint64(word)-thr)>>63)))
}

func keep64(v, scale float64, word uint32, thr uint64) float64 {
	return v * (scale * float64(int32(1-(uint64(word)-thr)>>63)))
}

func dropout32(dst, src []float32, thr uint64, scale float32, seed, pos uint64) {
	src = src[:len(dst)]
	k0, k1 := uint32(seed), uint32(seed>>32)
	i := min(len(dst), int((4-pos&3)&3))
	for j := 0; j < i; j++ {
		n := pos + uint64(j)
		dst[j] = keep32(src[j], scale, philoxBlock(seed, n>>2)[n&3], thr)
	}
	for ; i+8 <= len(dst); i += 8 {
		b := (pos + uint64(i)) >> 2
		x, y := philoxPair(b, b+1, k0, k1)
		d, s := dst[i:i+8:i+8], src[i:i+8:i+8]
		d[0] = keep32(s[0], scale, x[0], thr)
		d[1] = keep32(s[1], scale, x[1], thr)
		d[2] = keep32(s[2], scale, x[2], thr)
		d[3] = keep32(s[3], scale, x[3], thr)
		d[4] = keep32(s[4], scale, y[0], thr)
		d[5] = keep32(s[5], scale, y[1], thr)
		d[6] = keep32(s[6], scale, y[2], thr)
		d[7] = keep32(s[7], scale, y[3], thr)
	}
	for ; i < len(dst); i++ {
		n := pos + uint64(i)
		dst[i] = keep32(src[i], scale, philoxBlock(seed, n>>2)[n&3], thr)
	}
}

// dropout64 is the float64 path (gradient checks): one block per element.
func dropout64(dst, src []float64, thr uint64, scale float64, seed, pos uint64) {
	src = src[:len(dst)]
	for i, v := range src {
		n := pos + uint64(i)
		dst[i] = keep64(v, scale, philoxBlock(seed, n>>2)[n&3], thr)
	}
}
