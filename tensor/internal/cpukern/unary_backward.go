package cpukern

import "github.com/strata-ml/strata/tensor/internal/ops"

// UnaryBackward sets dx = dy * op'(x), the gradient of op's row in the op
// table (internal/ops), reading the saved input x or output y as
// op.BackwardUses says (the unused one may be nil). dx may be dy itself.
// It panics on an unknown op or mismatched lengths.
func UnaryBackward[T Float](op ops.UnaryOp, dx, x, y, dy []T) {
	checkUnary("UnaryBackward", op)
	if op == ops.Gelu {
		GeluBackward(dx, x, dy)
		return
	}
	n := len(dx)
	mustEq("UnaryBackward", "dy", len(dy), n)
	usesX, usesY := op.BackwardUses()
	if usesX {
		mustEq("UnaryBackward", "x", len(x), n)
	}
	if usesY {
		mustEq("UnaryBackward", "y", len(y), n)
	}
	grain := grainMem
	if op == ops.Silu { // recomputes sigmoid(x)
		grain = grainMath
	}
	if serial(n, grain) {
		unaryBackwardRange(op, dx, x, y, dy)
		return
	}
	ParallelFor(n, grain, func(lo, hi int) {
		var xs, ys []T
		if usesX {
			xs = x[lo:hi]
		}
		if usesY {
			ys = y[lo:hi]
		}
		unaryBackwardRange(op, dx[lo:hi], xs, ys, dy[lo:hi])
	})
}

func unaryBackwardRange[T Float](op ops.UnaryOp, dx, x, y, dy []T) {
	dy = dy[:len(dx)]
	switch op {
	case ops.Neg:
		for i, g := range dy {
			dx[i] = -g
		}
	case ops.Exp:
		y = y[:len(dx)]
		for i, g := range dy {
			dx[i] = g * y[i]
		}
	case ops.Log:
		x = x[:len(dx)]
		for i, g := range dy {
			dx[i] = g / x[i]
		}
	case ops.Sqrt:
		y = y[:len(dx)]
		for i, g := range dy {
			dx[i] = g * 0.5 / y[i]
		}
	case ops.Rsqrt:
		y = y[:len(dx)]
		for i, g := range dy {
			v := y[i]
			dx[i] = g * -0.5 * v * v * v
		}
	case ops.Tanh:
		y = y[:len(dx)]
		for i, g := range dy {
			v := y[i]
			dx[i] = g * (1 - v*v)
		}
	case ops.Relu:
		y = y[:len(dx)]
		for i, g := range dy {
			if y[i] <= 0 { // a NaN y passes g, as PyTorch's threshold_backward
				g = 0
			}
			dx[i] = g
		}
	case ops.Abs:
		x = x[:len(dx)]
		for i, g := range dy {
			v := x[i]
			switch {
			case v > 0:
			case v < 0:
				g = -g
			case v == 0:
				g = 0
			default: // NaN input: NaN gradient, as PyTorch's sgn gives
				g = v
			}
			dx[i] = g
		}
	case ops.Square:
		x = x[:len(dx)]
		for i, g := range dy {
			dx[i] = g * 2 * x[i]
		}
	case ops.Recip:
		y = y[:len(dx)]
		for i, g := range dy {
			v := y[i]
			dx[i] = -g * v * v
		}
	case ops.Sigmoid:
		y = y[:len(dx)]
		for i, g := range dy {
			v := y[i]
			dx[i] = g * v * (1 - v)
		}
	case ops.Silu:
		siluBackward(dx, x, dy)
	}
}

// siluBackward sets dx = dy * s * (1 + x*(1-s)), s = sigmoid(x), the form
// of PyTorch's silu_backward. dx may be dy itself.
func siluBackward[T Float](dx, x, dy []T) {
	if !isF32[T]() {
		dx, x, dy := f64(dx), f64(x), f64(dy)
		x, dy = x[:len(dx)], dy[:len(dx)]
		for i, v := range x {
			s := sigmoid64(v)
			dx[i] = dy[i] * s * (1 + v*(1-s))
		}
		return
	}
	siluBackward32(f32(dx), f32(x), f32(dy))
}

// siluBackward32 is the float32 siluBackward in three passes over stack
// blocks: the exp argument, exp32Slice, and the combination.
func siluBackward32(d, xs, gs []float32) {
	var buf [expBlock]float32
	for lo := 0; lo < len(d); lo += expBlock {
		hi := min(lo+expBlock, len(d))
		dd, xx, gg := d[lo:hi], xs[lo:hi], gs[lo:hi]
		t := buf[:len(dd)]
		xx, gg = xx[:len(t)], gg[:len(t)]
		for i, v := range xx {
			t[i] = -v
		}
		exp32Slice(t, t)
		dd = dd[:len(t)]
		for i, v := range xx {
			s := 1 / (1 + t[i])
			dd[i] = gg[i] * s * (1 + v*(1-s))
		}
	}
}

// GeluBackward sets dx = dy * gelu'(x) for the tanh-approximation GELU:
// gelu'(x) = 0.5(1 + tanh u) + 0.5 x (1 - tanh^2 u) sqrt(2/pi)(1 + 3*0.044715 x^2),
// computed through s = sigmoid(2u) = 0.5(1 + tanh u) as
// s + 2 x s (1-s) du/dx. dx may be dy itself.
func GeluBackward[T Float](dx, x, dy []T) {
	n := len(dx)
	mustEq("GeluBackward", "x", len(x), n)
	mustEq("GeluBackward", "dy", len(dy), n)
	grain := unaryGrain(ops.Gelu)
	if serial(n, grain) {
		geluBackwardRange(dx, x, dy)
		return
	}
	ParallelFor(n, grain, func(lo, hi int) { geluBackwardRange(dx[lo:hi], x[lo:hi], dy[lo:hi]) })
}

func geluBackwardRange[T Float](dx, x, dy []T) {
	if !isF32[T]() {
		dx, x, dy := f64(dx), f64(x), f64(dy)
		x, dy = x[:len(dx)], dy[:len(dx)]
		for i, v := range x {
			dx[i] = dy[i] * geluGrad64(v)
		}
		return
	}
	d, xs, gs := f32(dx), f32(x), f32(dy)
	for len(d) > 0 {
		k := geluBackwardSIMD(d, xs, gs)
		end := min(k+8, len(d))
		geluBackward32Scalar(d[k:end], xs[k:end], gs[k:end])
		d, xs, gs = d[end:], xs[end:], gs[end:]
	}
}

// geluBackward32Scalar is the float32 GeluBackward in three passes over
// stack blocks: the exp argument, exp32Slice, and the combination.
func geluBackward32Scalar(d, xs, gs []float32) {
	var buf [expBlock]float32
	for lo := 0; lo < len(d); lo += expBlock {
		hi := min(lo+expBlock, len(d))
		dd, xx, gg := d[lo:hi], xs[lo:hi], gs[lo:hi]
		t := buf[:len(dd)]
		xx, gg = xx[:len(t)], gg[:len(t)]
		for i, v := range xx {
			t[i] = -(2 * geluK) * v * (1 + geluC*v*v)
		}
		exp32Slice(t, t)
		dd = dd[:len(t)]
		for i, v := range xx {
			s := 1 / (1 + t[i])
			// x^2 first, as geluGrad32 and the vector loop: 3*geluC*v*v
			// would form (3 geluC v) v, which overflows only past 5e19.
			x2 := v * v
			du := geluK * (1 + 3*geluC*x2)
			dd[i] = gg[i] * (s + 2*v*s*(1-s)*du)
		}
	}
}
