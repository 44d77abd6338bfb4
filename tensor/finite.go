package tensor

import "math"

// AllFinite reports whether t, of a float dtype, holds no NaN and no
// infinity (an empty t holds none): its sum of squares, a float64 taken
// by SumSquaresAll (one wait for a GPU), is finite, or, when float64
// entries past 1e154 overflow that sum, its largest and smallest entries
// are. An integer t is an *OpError wrapping ErrDType.
func AllFinite(t *Tensor) bool {
	const op = "AllFinite"
	t.live(op)
	if !t.dtype.IsFloat() {
		fail(op, ErrDType, "%v holds no NaN or infinity: want a float dtype", t.dtype)
	}
	if t.Numel() == 0 {
		return true
	}
	s := SumSquaresAll([]*Tensor{t})
	if !math.IsInf(s, 1) || t.dtype != Float64 {
		return !math.IsNaN(s) && !math.IsInf(s, 0)
	}
	hi := Max(t, false)
	defer hi.Release()
	neg := Neg(t)
	defer neg.Release()
	lo := Max(neg, false)
	defer lo.Release()
	return !math.IsInf(hi.Item(), 0) && !math.IsInf(lo.Item(), 0)
}

// HasNaN reports whether t, of a float dtype, holds a NaN (infinities are
// not NaNs): its sum of squares, a float64 taken by SumSquaresAll (one
// wait for a GPU), is NaN, which only a NaN entry makes (squares that
// overflow give +Inf, and +Inf plus +Inf stays +Inf). An integer t is an
// *OpError wrapping ErrDType.
func HasNaN(t *Tensor) bool {
	const op = "HasNaN"
	t.live(op)
	if !t.dtype.IsFloat() {
		fail(op, ErrDType, "%v holds no NaN: want a float dtype", t.dtype)
	}
	return t.Numel() > 0 && math.IsNaN(SumSquaresAll([]*Tensor{t}))
}
