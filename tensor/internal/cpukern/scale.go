package cpukern

import "github.com/strata-ml/strata/tensor/internal/ops"

// Scale sets dst = alpha*src; dst may be src itself.
func Scale[T Float](dst, src []T, alpha T) {
	mustEq("Scale", "src", len(src), len(dst))
	if serial(len(dst), grainMem) {
		scaleRange(dst, src, alpha)
		return
	}
	ParallelFor(len(dst), grainMem, func(lo, hi int) { scaleRange(dst[lo:hi], src[lo:hi], alpha) })
}

func scaleRange[T Float](dst, src []T, alpha T) {
	if isF32[T]() {
		k := vsSIMD(ops.Mul, f32(dst), f32(src), float32(alpha))
		dst, src = dst[k:], src[k:]
	}
	src = src[:len(dst)]
	for i, v := range src {
		dst[i] = alpha * v
	}
}

// AddScalar sets dst = src + c; dst may be src itself.
func AddScalar[T Float](dst, src []T, c T) {
	mustEq("AddScalar", "src", len(src), len(dst))
	if serial(len(dst), grainMem) {
		addScalarRange(dst, src, c)
		return
	}
	ParallelFor(len(dst), grainMem, func(lo, hi int) { addScalarRange(dst[lo:hi], src[lo:hi], c) })
}

func addScalarRange[T Float](dst, src []T, c T) {
	if isF32[T]() {
		k := vsSIMD(ops.Add, f32(dst), f32(src), float32(c))
		dst, src = dst[k:], src[k:]
	}
	src = src[:len(dst)]
	for i, v := range src {
		dst[i] = v + c
	}
}

// Axpy sets dst += alpha*x (BLAS axpy); gradient accumulation uses it with
// alpha 1.
func Axpy[T Float](dst []T, alpha T, x []T) {
	mustEq("Axpy", "x", len(x), len(dst))
	if serial(len(dst), grainMem) {
		axpyRange(dst, alpha, x)
		return
	}
	ParallelFor(len(dst), grainMem, func(lo, hi int) { axpyRange(dst[lo:hi], alpha, x[lo:hi]) })
}

func axpyRange[T Float](dst []T, alpha T, x []T) {
	if isF32[T]() {
		if alpha == 1 {
			k := vvSIMD(ops.Add, f32(dst), f32(dst), f32(x))
			dst, x = dst[k:], x[k:]
		} else {
			k := axpySIMD(f32(dst), float32(alpha), f32(x))
			dst, x = dst[k:], x[k:]
		}
	}
	x = x[:len(dst)]
	if alpha == 1 {
		for i, v := range x {
			dst[i] += v
		}
		return
	}
	for i, v := range x {
		dst[i] += alpha * v
	}
}
