package cpukern

import (
	"fmt"
	"math"

	"github.com/strata-ml/strata/tensor/internal/ops"
)

// checkUnary panics on a code outside the op table.
func checkUnary(kernel string, op ops.UnaryOp) {
	if op >= ops.NumUnary {
		panic(fmt.Sprintf("cpukern.%s: unknown %v", kernel, op))
	}
}

// unaryGrain is op's parallel grain: ops costing a few ns an element
// split sooner than memory-bound ones. Exp and GELU run at memory speed
// where the vector loops exist.
func unaryGrain(op ops.UnaryOp) int {
	switch op {
	case ops.Exp, ops.Gelu:
		if hasSIMD {
			return grainMem
		}
		return grainMath
	case ops.Log, ops.Tanh, ops.Sigmoid, ops.Silu:
		return grainMath
	}
	return grainMem
}

// Unary sets dst[i] = op(src[i]), the function of op's row in the op
// table (internal/ops). dst may be src itself (not a partial overlap). It
// panics on an unknown op or when len(src) != len(dst).
func Unary[T Float](op ops.UnaryOp, dst, src []T) {
	checkUnary("Unary", op)
	mustEq("Unary", "src", len(src), len(dst))
	grain := unaryGrain(op)
	if serial(len(dst), grain) {
		unaryRange(op, dst, src)
		return
	}
	ParallelFor(len(dst), grain, func(lo, hi int) { unaryRange(op, dst[lo:hi], src[lo:hi]) })
}

func unaryRange[T Float](op ops.UnaryOp, dst, src []T) {
	if isF32[T]() {
		unary32(op, f32(dst), f32(src))
		return
	}
	unary64(op, f64(dst), f64(src))
}

// unary32 holds the float32 loops. Ops that need exp run it over blocks of
// expBlock elements in three passes (argument, exp32Slice, combine).
func unary32(op ops.UnaryOp, dst, src []float32) {
	src = src[:len(dst)]
	switch op {
	case ops.Neg:
		for i, x := range src {
			dst[i] = -x
		}
	case ops.Exp:
		exp32Slice(dst, src)
	case ops.Log:
		for i, x := range src {
			dst[i] = float32(math.Log(float64(x)))
		}
	case ops.Sqrt:
		for i, x := range src {
			dst[i] = float32(math.Sqrt(float64(x)))
		}
	case ops.Rsqrt:
		for i, x := range src {
			dst[i] = 1 / float32(math.Sqrt(float64(x)))
		}
	case ops.Tanh:
		for i, x := range src {
			dst[i] = tanh32(x)
		}
	case ops.Gelu:
		for len(dst) > 0 {
			k := geluSIMD(dst, src)
			// The vector loop stops at the last whole block of 8, or before
			// a block it leaves to Go: do that block, or the tail, here.
			end := min(k+8, len(dst))
			gelu32Scalar(dst[k:end], src[k:end])
			dst, src = dst[end:], src[end:]
		}
	case ops.Relu:
		for i, x := range src {
			if x <= 0 { // NaN propagates, as in PyTorch
				x = 0
			}
			dst[i] = x
		}
	case ops.Abs:
		for i, x := range src {
			dst[i] = math.Float32frombits(math.Float32bits(x) &^ (1 << 31))
		}
	case ops.Square:
		for i, x := range src {
			dst[i] = x * x
		}
	case ops.Recip:
		for i, x := range src {
			dst[i] = 1 / x
		}
	case ops.Sigmoid:
		var buf [expBlock]float32
		for lo := 0; lo < len(dst); lo += expBlock {
			d, s := dst[lo:min(lo+expBlock, len(dst))], src[lo:]
			t := buf[:len(d)]
			s = s[:len(t)]
			for i, x := range s {
				t[i] = -x
			}
			exp32Slice(t, t)
			d = d[:len(t)]
			for i := range t {
				d[i] = 1 / (1 + t[i])
			}
		}
	case ops.Silu:
		silu32(dst, src)
	}
}

// gelu32Scalar is x sigmoid(2u) in three passes over stack blocks:
// the exp argument, exp32Slice, and x / (1 + e).
func gelu32Scalar(dst, src []float32) {
	var buf [expBlock]float32
	for lo := 0; lo < len(dst); lo += expBlock {
		d, s := dst[lo:min(lo+expBlock, len(dst))], src[lo:]
		t := buf[:len(d)]
		s = s[:len(t)]
		for i, x := range s {
			t[i] = -(2 * geluK) * x * (1 + geluC*x*x)
		}
		exp32Slice(t, t)
		d = d[:len(t)]
		for i, x := range s {
			d[i] = x / (1 + t[i])
		}
	}
}

// silu32 is x / (1 + e^-x), as PyTorch computes SiLU, in three passes
// over stack blocks: the exp argument, exp32Slice, and the division.
func silu32(dst, src []float32) {
	var buf [expBlock]float32
	for lo := 0; lo < len(dst); lo += expBlock {
		d, s := dst[lo:min(lo+expBlock, len(dst))], src[lo:]
		t := buf[:len(d)]
		s = s[:len(t)]
		for i, x := range s {
			t[i] = -x
		}
		exp32Slice(t, t)
		d = d[:len(t)]
		for i, x := range s {
			d[i] = x / (1 + t[i])
		}
	}
}

// unary64 holds the float64 loops, on the math package.
func unary64(op ops.UnaryOp, dst, src []float64) {
	src = src[:len(dst)]
	switch op {
	case ops.Neg:
		for i, x := range src {
			dst[i] = -x
		}
	case ops.Exp:
		for i, x := range src {
			dst[i] = math.Exp(x)
		}
	case ops.Log:
		for i, x := range src {
			dst[i] = log64(x)
		}
	case ops.Sqrt:
		for i, x := range src {
			dst[i] = math.Sqrt(x)
		}
	case ops.Rsqrt:
		for i, x := range src {
			dst[i] = 1 / math.Sqrt(x)
		}
	case ops.Tanh:
		for i, x := range src {
			dst[i] = math.Tanh(x)
		}
	case ops.Gelu:
		for i, x := range src {
			dst[i] = gelu64(x)
		}
	case ops.Relu:
		for i, x := range src {
			if x <= 0 {
				x = 0
			}
			dst[i] = x
		}
	case ops.Abs:
		for i, x := range src {
			dst[i] = math.Abs(x)
		}
	case ops.Square:
		for i, x := range src {
			dst[i] = x * x
		}
	case ops.Recip:
		for i, x := range src {
			dst[i] = 1 / x
		}
	case ops.Sigmoid:
		for i, x := range src {
			dst[i] = sigmoid64(x)
		}
	case ops.Silu:
		for i, x := range src {
			dst[i] = x / (1 + math.Exp(-x))
		}
	}
}

// log64 is math.Log with subnormal arguments scaled into the normal range
// first: Go's amd64 math.Log does not normalise them (golang/go#56600).
func log64(x float64) float64 {
	if x > 0 && x < 0x1p-1022 {
		return math.Log(x*0x1p54) - 54*math.Ln2
	}
	return math.Log(x)
}
