package cpukern

import "math"

// Float32 math for the hot loops. Go's math package works in float64 and
// is not inlined; converting each float32 to float64 and back around a
// call costs 4x the arithmetic itself. These functions stay in float32 and
// are accurate to a few ulp (the tests bound them against math.* in
// float64). The hot one, exp, is written out inline in the loop
// expShiftSumScalar (and in exp_amd64.s); exp32, tanh32 and the GELU
// helpers serve per-element uses. float64 kernels use the math package.

// The float32 exp fast path covers (expLo32, expHi32): above, 2^k would
// overflow the exponent field; below, results leave the normal range.
// Arguments outside (and NaN) take math.Exp, which is exact there.
const (
	expLo32 = -87.33
	expHi32 = 88.37
	// Below expZero32, e^x < 2^-150 rounds to +0: no need for math.Exp
	// (softmax rows with masked entries meet many of these).
	expZero32 = -104
	log2e32   = 1.44269504
	// ln2Hi32 has 9 significant bits, so n*ln2Hi32 is exact for |n| <= 2^15;
	// ln2Hi32+ln2Lo32 carries ln 2 to about 2^-36 (Cody-Waite reduction).
	ln2Hi32 = 0.693359375
	ln2Lo32 = -2.12194440e-4
	// roundShift32 rounds a float32 of magnitude < 2^22 to an integer when
	// added and subtracted; the integer is then in its low mantissa bits.
	roundShift32 = 0x1.8p23
)

// expm1Core32 returns (2^k, e^r - 1) with x = k ln2 + r, |r| <= ln2/2, for
// x in (expLo32, expHi32). e^r - 1 is a degree-7 Taylor polynomial
// (truncation error below 6e-9 relative), evaluated by Estrin's scheme
// for instruction-level parallelism.
func expm1Core32(x float32) (scale, q float32) {
	t := x*log2e32 + roundShift32
	n := t - roundShift32
	k := int32(math.Float32bits(t) - math.Float32bits(roundShift32))
	r := x - n*ln2Hi32 - n*ln2Lo32
	r2 := r * r
	q = r + r2*((0.5+r*(1.0/6))+r2*((1.0/24+r*(1.0/120))+r2*(1.0/720+r*(1.0/5040))))
	return math.Float32frombits(uint32(k+127) << 23), q
}

// exp32 returns e^x for float32 within 2 ulp.
func exp32(x float32) float32 {
	if x > expLo32 && x < expHi32 {
		s, q := expm1Core32(x)
		return s + s*q
	}
	return expSlow32(x)
}

//go:noinline
func expSlow32(x float32) float32 { return float32(math.Exp(float64(x))) }

// tanh32 returns tanh(x) = expm1(2|x|) / (expm1(2|x|) + 2) with the sign of
// x. expm1 is formed as (2^k - 1) + 2^k q, exact in its first term, so the
// quotient keeps full relative accuracy down to tiny |x| (where it tends to
// 2|x|/2) and never suffers the cancellation of 1 - 2/(e^{2x}+1).
func tanh32(x float32) float32 {
	ax := math.Float32frombits(math.Float32bits(x) &^ (1 << 31))
	if ax < 9 {
		s, q := expm1Core32(2 * ax)
		em1 := (s - 1) + s*q
		t := em1 / (em1 + 2)
		return math.Float32frombits(math.Float32bits(t) | math.Float32bits(x)&(1<<31))
	}
	if ax != ax { // NaN
		return x
	}
	// tanh(9) rounds to 1 in float32.
	return math.Float32frombits(math.Float32bits(1) | math.Float32bits(x)&(1<<31))
}

// sigmoid32 returns 1/(1+e^-x); overflow of e^-x gives exactly 0.
func sigmoid32(x float32) float32 { return 1 / (1 + exp32(-x)) }

// GELU, tanh approximation: 0.5 x (1 + tanh(u)), u = sqrt(2/pi)(x + 0.044715 x^3).
// Since 0.5(1 + tanh(u)) = sigmoid(2u) it is computed as x sigmoid(2u):
// one exp, no cancellation in 1 + tanh(u) for negative x.
const (
	geluK = 0.7978845608028654 // sqrt(2/pi)
	geluC = 0.044715
)

func gelu32(x float32) float32 {
	u2 := (2 * geluK) * x * (1 + geluC*x*x)
	return x / (1 + exp32(-u2))
}

// geluGrad32 is d gelu/dx = s + 2 x s (1-s) du/dx with s = sigmoid(2u),
// which equals 0.5(1+tanh u) + 0.5 x (1 - tanh^2 u) du/dx.
func geluGrad32(x float32) float32 {
	x2 := x * x
	u2 := (2 * geluK) * x * (1 + geluC*x2)
	s := 1 / (1 + exp32(-u2))
	du := geluK * (1 + 3*geluC*x2)
	return s + 2*x*s*(1-s)*du
}

func gelu64(x float64) float64 {
	u2 := (2 * geluK) * x * (1 + geluC*x*x)
	return x / (1 + math.Exp(-u2))
}

func geluGrad64(x float64) float64 {
	x2 := x * x
	u2 := (2 * geluK) * x * (1 + geluC*x2)
	s := 1 / (1 + math.Exp(-u2))
	du := geluK * (1 + 3*geluC*x2)
	return s + 2*x*s*(1-s)*du
}

func sigmoid64(x float64) float64 { return 1 / (1 + math.Exp(-x)) }

// expT is e^x at T's precision: exp32 for float32, math.Exp for float64.
// isF32 folds to a constant, so the branch disappears per instantiation.
func expT[T Float](x T) T {
	if isF32[T]() {
		return T(exp32(float32(x)))
	}
	return T(math.Exp(float64(x)))
}

// expBlock is the length of the stack buffers that the float32 kernels
// use to run a transcendental over a row in three tight passes (argument,
// exp, combine) instead of one loop around a non-inlined call.
const expBlock = 256

// exp32Slice sets dst[i] = e^src[i]; dst may alias src.
func exp32Slice(dst, src []float32) { expShiftSum32(dst, src, 0) }

// expShiftSum32 sets dst[i] = e^(src[i]-shift) and returns the sum of the
// results in float64; dst may alias src. Where AVX2 and FMA exist, blocks
// of eight go through the vector loop of exp_amd64.s (the same algorithm,
// eight lanes, fused multiply-adds); a block holding an argument outside
// the fast range, and the last len%8 elements, go through the scalar loop.
func expShiftSum32(dst, src []float32, shift float32) float64 {
	src = src[:len(dst)]
	var sum float64
	if hasSIMD {
		var acc [8]float64
		for len(dst) >= 8 {
			k := expShiftSIMD(dst, src, shift, &acc)
			dst, src = dst[k:], src[k:]
			if len(dst) < 8 {
				break
			}
			// The next block holds an argument outside the fast range.
			sum += expShiftSumScalar(dst[:8], src[:8], shift)
			dst, src = dst[8:], src[8:]
		}
		sum += ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]))
	}
	return sum + expShiftSumScalar(dst, src, shift)
}

// expShiftSumScalar is expShiftSum32 without vectors. It is the one place
// the float32 exp is written out inline (Go will not inline exp32
// itself), so it runs at the speed of straight-line scalar code, about 10
// cycles an element. Arguments outside (expLo32, expHi32) and NaN take
// math.Exp.
func expShiftSumScalar(dst, src []float32, shift float32) float64 {
	src = src[:len(dst)]
	var sum float64
	for i, v := range src {
		x := v - shift
		if !(x > expLo32 && x < expHi32) {
			var e float32
			if !(x < expZero32) {
				e = expSlow32(x)
			}
			dst[i] = e
			sum += float64(e)
			continue
		}
		t := x*log2e32 + roundShift32
		n := t - roundShift32
		k := int32(math.Float32bits(t) - math.Float32bits(roundShift32))
		r := x - n*ln2Hi32 - n*ln2Lo32
		r2 := r * r
		q := r + r2*((0.5+r*(1.0/6))+r2*((1.0/24+r*(1.0/120))+r2*(1.0/720+r*(1.0/5040))))
		s := math.Float32frombits(uint32(k+127) << 23)
		e := s + s*q
		dst[i] = e
		sum += float64(e)
	}
	return sum
}

// sumExpShift32 returns the float64 sum of e^(src[i]-shift), using a stack
// buffer so that src is left untouched.
func sumExpShift32(src []float32, shift float32) float64 {
	var buf [expBlock]float32
	var sum float64
	for lo := 0; lo < len(src); lo += expBlock {
		s := src[lo:min(lo+expBlock, len(src))]
		sum += expShiftSum32(buf[:len(s)], s, shift)
	}
	return sum
}

// rowMax returns the largest element of a non-empty row, ignoring NaN
// (callers get NaN back from the arithmetic that follows).
func rowMax[T Float](x []T) T {
	m := x[0]
	for _, v := range x[1:] {
		if v > m {
			m = v
		}
	}
	return m
}

// dot returns the float64 sum of a[i]*b[i] with four accumulators.
func dot[T Float](a, b []T) float64 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float64
	i := 0
	for ; i+4 <= len(a); i += 4 {
		p, q := a[i:i+4:i+4], b[i:i+4:i+4]
		s0 += float64(p[0]) * float64(q[0])
		s1 += float64(p[1]) * float64(q[1])
		s2 += float64(p[2]) * float64(q[2])
		s3 += float64(p[3]) * float64(q[3])
	}
	for ; i < len(a); i++ {
		s0 += float64(a[i]) * float64(b[i])
	}
	return (s0 + s1) + (s2 + s3)
}
