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
// float32 is updated in float32 arithmetic, operation for operation as
// PyTorch's single-tensor float32 AdamW; float64 in float64, with one
// division. It panics on step < 1 or mismatched lengths.
func AdamW[T Float](p, g, m, v []T, lr, beta1, beta2, eps, weightDecay float64, step int) {
	n := len(p)
	mustEq("AdamW", "g", len(g), n)
	mustEq("AdamW", "m", len(m), n)
	mustEq("AdamW", "v", len(v), n)
	if step < 1 {
		panic(fmt.Sprintf("cpukern.AdamW: step = %d, want the 1-based step count", step))
	}
	c := adamConsts{
		decay:    1 - float64(lr*weightDecay), // rounded product: no FMA (as the GPU kernels)
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
	if isF32[T]() {
		adamW32(f32(p), f32(g), f32(m), f32(v), c)
		return
	}
	g, m, v = g[:len(p)], m[:len(p)], v[:len(p)]
	decay, w1, beta2, w2 := c.decay, c.w1, c.beta2, c.w2
	// lr/bc1 * m / (sqrt(v)/sqrt(bc2) + eps), with sqrt(bc2) multiplied
	// through: one division instead of two.
	stepSize, epsBc2 := c.stepSize*c.bc2Sqrt, c.eps*c.bc2Sqrt
	for i := range p {
		gi := float64(g[i])
		mi := float64(m[i])
		mt := T(mi + w1*(gi-mi))
		vt := T(beta2*float64(v[i]) + w2*gi*gi)
		pi := float64(T(float64(p[i]) * decay))
		pi -= stepSize * float64(mt) / (math.Sqrt(float64(vt)) + epsBc2)
		p[i], m[i], v[i] = T(pi), mt, vt
	}
}

// adamW32 is the float32 update in float32 arithmetic, op for op as
// PyTorch's float32 AdamW. (Widening each operand to float64 would chain
// the loop's iterations through the cvtss2sd false dependency on the
// previous sqrt and division, tripling its time.)
func adamW32(p, g, m, v []float32, c *adamConsts) {
	g, m, v = g[:len(p)], m[:len(p)], v[:len(p)]
	decay, w1, beta2, w2 := float32(c.decay), float32(c.w1), float32(c.beta2), float32(c.w2)
	stepSize, bc2Sqrt, eps := float32(c.stepSize), float32(c.bc2Sqrt), float32(c.eps)
	lerpLow := w1 < 0.5 // torch.lerp's two forms
	for i := range p {
		gi, mi := g[i], m[i]
		var mt float32
		if lerpLow {
			mt = mi + w1*(gi-mi)
		} else {
			mt = gi - (gi-mi)*(1-w1)
		}
		vt := beta2*v[i] + w2*(gi*gi)
		denom := float32(math.Sqrt(float64(vt)))/bc2Sqrt + eps
		p[i] = p[i]*decay - stepSize*(mt/denom)
		m[i], v[i] = mt, vt
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
