package cpukern

import (
	"fmt"
	"math"
)

// UnaryOp names an element-wise function for Unary and UnaryBackward.
type UnaryOp uint8

// The element-wise functions. Gelu is the tanh approximation
// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), as in GPT-2.
const (
	Neg UnaryOp = iota
	Exp
	Log
	Sqrt
	Rsqrt
	Tanh
	Gelu
	Relu
	Abs
	Square
	Recip
	Sigmoid
	numUnaryOps
)

var unaryNames = [numUnaryOps]string{
	Neg: "Neg", Exp: "Exp", Log: "Log", Sqrt: "Sqrt", Rsqrt: "Rsqrt", Tanh: "Tanh",
	Gelu: "Gelu", Relu: "Relu", Abs: "Abs", Square: "Square", Recip: "Recip", Sigmoid: "Sigmoid",
}

// String returns the op's name, such as "Gelu".
func (op UnaryOp) String() string {
	if op < numUnaryOps {
		return unaryNames[op]
	}
	return fmt.Sprintf("UnaryOp(%d)", uint8(op))
}

// BackwardUses reports which saved tensors UnaryBackward reads for op: the
// input x, the output y, both or neither. Autograd saves only those; the
// other argument may be nil.
func (op UnaryOp) BackwardUses() (x, y bool) {
	switch op {
	case Log, Gelu, Abs, Square:
		return true, false
	case Exp, Sqrt, Rsqrt, Tanh, Relu, Recip, Sigmoid:
		return false, true
	}
	return false, false
}

func (op UnaryOp) check(kernel string) {
	if op >= numUnaryOps {
		panic(fmt.Sprintf("cpukern.%s: unknown %v", kernel, op))
	}
}

// grain is op's parallel grain: ops costing a few ns an element split
// sooner than memory-bound ones. Exp and GELU run at memory speed where
// the vector loops exist.
func (op UnaryOp) grain() int {
	switch op {
	case Exp, Gelu:
		if hasSIMD {
			return grainMem
		}
		return grainMath
	case Log, Tanh, Sigmoid:
		return grainMath
	}
	return grainMem
}

// Unary sets dst[i] = op(src[i]). dst may be src itself (not a partial
// overlap). It panics on an unknown op or when len(src) != len(dst).
func Unary[T Float](op UnaryOp, dst, src []T) {
	op.check("Unary")
	mustEq("Unary", "src", len(src), len(dst))
	grain := op.grain()
	if serial(len(dst), grain) {
		unaryRange(op, dst, src)
		return
	}
	ParallelFor(len(dst), grain, func(lo, hi int) { unaryRange(op, dst[lo:hi], src[lo:hi]) })
}

func unaryRange[T Float](op UnaryOp, dst, src []T) {
	if isF32[T]() {
		unary32(op, f32(dst), f32(src))
		return
	}
	unary64(op, f64(dst), f64(src))
}

// unary32 holds the float32 loops. Ops that need exp run it over blocks of
// expBlock elements in three passes (argument, exp32Slice, combine).
func unary32(op UnaryOp, dst, src []float32) {
	src = src[:len(dst)]
	switch op {
	case Neg:
		for i, x := range src {
			dst[i] = -x
		}
	case Exp:
		exp32Slice(dst, src)
	case Log:
		for i, x := range src {
			dst[i] = float32(math.Log(float64(x)))
		}
	case Sqrt:
		for i, x := range src {
			dst[i] = float32(math.Sqrt(float64(x)))
		}
	case Rsqrt:
		for i, x := range src {
			dst[i] = 1 / float32(math.Sqrt(float64(x)))
		}
	case Tanh:
		for i, x := range src {
			dst[i] = tanh32(x)
		}
	case Gelu:
		for len(dst) > 0 {
			k := geluSIMD(dst, src)
			// The vector loop stops at the last whole block of 8, or before
			// a block it leaves to Go: do that block, or the tail, here.
			end := min(k+8, len(dst))
			gelu32Scalar(dst[k:end], src[k:end])
			dst, src = dst[end:], src[end:]
		}
	case Relu:
		for i, x := range src {
			if x <= 0 { // NaN propagates, as in PyTorch
				x = 0
			}
			dst[i] = x
		}
	case Abs:
		for i, x := range src {
			dst[i] = math.Float32frombits(math.Float32bits(x) &^ (1 << 31))
		}
	case Square:
		for i, x := range src {
			dst[i] = x * x
		}
	case Recip:
		for i, x := range src {
			dst[i] = 1 / x
		}
	case Sigmoid:
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

// unary64 holds the float64 loops, on the math package.
func unary64(op UnaryOp, dst, src []float64) {
	src = src[:len(dst)]
	switch op {
	case Neg:
		for i, x := range src {
			dst[i] = -x
		}
	case Exp:
		for i, x := range src {
			dst[i] = math.Exp(x)
		}
	case Log:
		for i, x := range src {
			dst[i] = math.Log(x)
		}
	case Sqrt:
		for i, x := range src {
			dst[i] = math.Sqrt(x)
		}
	case Rsqrt:
		for i, x := range src {
			dst[i] = 1 / math.Sqrt(x)
		}
	case Tanh:
		for i, x := range src {
			dst[i] = math.Tanh(x)
		}
	case Gelu:
		for i, x := range src {
			dst[i] = gelu64(x)
		}
	case Relu:
		for i, x := range src {
			if x <= 0 {
				x = 0
			}
			dst[i] = x
		}
	case Abs:
		for i, x := range src {
			dst[i] = math.Abs(x)
		}
	case Square:
		for i, x := range src {
			dst[i] = x * x
		}
	case Recip:
		for i, x := range src {
			dst[i] = 1 / x
		}
	case Sigmoid:
		for i, x := range src {
			dst[i] = sigmoid64(x)
		}
	}
}
