package cpukern

import (
	"fmt"
	"math"
)

// AdamW takes one step of torch.optim.AdamW (amsgrad off, maximize off)
// on parameters p with gradient g and moment buffers m, v (zero before
// the first step), step being the 1-based step count:
//
//	p *= 1 - lr*weightDecay                (decoupled decay, first)
//	m = m + (1-beta1)*(g - m)              (lerp, as PyTorch)
//	v = beta2*v + (1-beta2)*g*g
//	p -= lr/(1-beta1^step) * m / (sqrt(v)/sqrt(1-beta2^step) + eps)
//
// Each element is updated in float64, with m, v and the decayed p rounded
// to T where PyTorch stores them. It panics on
// step < 1 or mismatched lengths.
func AdamW[T Float](p, g, m, v []T, lr, beta1, beta2, eps, weightDecay float64, step int) {
	n := len(p)
	mustEq("AdamW", "g", len(g), n)
	mustEq("AdamW", "m", len(m), n)
	mustEq("AdamW", "v", len(v), n)
	if step < 1 {
		panic(fmt.Sprintf("cpukern.AdamW: step = %d, want the 1-based step count", step))
	}
	c := adamConsts{
		decay:    1 - lr*weightDecay,
		w1:       1 - beta1,
		beta2:    beta2,
		w2:       1 - beta2,
		stepSize: lr / (1 - math.Pow(beta1, float64(step))),
		bc2Sqrt:  math.Sqrt(1 - math.Pow(beta2, float64(step))),
		eps:      eps,
	}
	if serial(n, grainMath) {
		adamWRange(p, g, m, v, &c)
		return
	}
	cc := c // the closure's copy; c itself stays on the stack
	ParallelFor(n, grainMath, func(lo, hi int) { adamWRange(p[lo:hi], g[lo:hi], m[lo:hi], v[lo:hi], &cc) })
}

type adamConsts struct{ decay, w1, beta2, w2, stepSize, bc2Sqrt, eps float64 }

func adamWRange[T Float](p, g, m, v []T, c *adamConsts) {
	g, m, v = g[:len(p)], m[:len(p)], v[:len(p)]
	decay, w1, beta2, w2, stepSize, bc2Sqrt, eps := c.decay, c.w1, c.beta2, c.w2, c.stepSize, c.bc2Sqrt, c.eps
	for i := range p {
		gi := float64(g[i])
		mi := float64(m[i])
		// Round m, v and the decayed p to T before they are used, as
		// PyTorch's sequence of in-place ops does.
		mt := T(mi + w1*(gi-mi))
		vt := T(beta2*float64(v[i]) + w2*gi*gi)
		pi := float64(T(float64(p[i]) * decay))
		pi -= stepSize * float64(mt) / (math.Sqrt(float64(vt))/bc2Sqrt + eps)
		p[i], m[i], v[i] = T(pi), mt, vt
	}
}

// SGD takes one step of torch.optim.SGD (dampening 0, maximize off):
//
//	d = g + weightDecay*p
//	buf = momentum*buf + d                 (when momentum != 0)
//	d = d + momentum*buf if nesterov, else d = buf
//	p -= lr*d
//
// buf must start zeroed (PyTorch's first step sets buf = d, the same
// value) and may be nil when momentum == 0. It panics on nesterov without
// momentum, a missing buf, or mismatched lengths.
func SGD[T Float](p, g, buf []T, lr, momentum, weightDecay float64, nesterov bool) {
	n := len(p)
	mustEq("SGD", "g", len(g), n)
	if momentum != 0 {
		mustEq("SGD", "buf", len(buf), n)
	} else if nesterov {
		panic("cpukern.SGD: nesterov momentum requires a momentum")
	}
	if serial(n, grainMem) {
		sgdRange(p, g, buf, lr, momentum, weightDecay, nesterov)
		return
	}
	ParallelFor(n, grainMem, func(lo, hi int) {
		var b []T
		if momentum != 0 {
			b = buf[lo:hi]
		}
		sgdRange(p[lo:hi], g[lo:hi], b, lr, momentum, weightDecay, nesterov)
	})
}

func sgdRange[T Float](p, g, buf []T, lr, momentum, wd float64, nesterov bool) {
	g = g[:len(p)]
	if momentum == 0 {
		for i := range p {
			pi := float64(p[i])
			p[i] = T(pi - lr*(float64(g[i])+wd*pi))
		}
		return
	}
	buf = buf[:len(p)]
	for i := range p {
		pi := float64(p[i])
		d := float64(g[i]) + wd*pi
		bt := T(momentum*float64(buf[i]) + d)
		buf[i] = bt
		b := float64(bt)
		if nesterov {
			d += momentum * b
		} else {
			d = b
		}
		p[i] = T(pi - lr*d)
	}
}
