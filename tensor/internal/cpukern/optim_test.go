package cpukern

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestAdamWFirstStep(t *testing.T) {
	// Step 1 of Adam moves each weight by lr * g/|g| (bias-corrected
	// moments), after the decoupled decay.
	p, g := []float64{1, -2}, []float64{0.5, -3}
	m, v := make([]float64, 2), make([]float64, 2)
	AdamW(p, g, m, v, 0.1, 0.9, 0.999, 1e-8, 0.01, 1)
	assert.InDelta(t, 1*(1-0.001)-0.1*0.5/(0.5+1e-8), p[0], 1e-15)
	assert.InDelta(t, -2*(1-0.001)+0.1*3/(3+1e-8), p[1], 1e-15)
	assert.InDelta(t, 0.05, m[0], 1e-16)
	assert.InDelta(t, 0.001*0.25, v[0], 1e-18)
}

func TestAdamWMatchesReference(t *testing.T) {
	testAdamW[float32](t)
	testAdamW[float64](t)
}

func testAdamW[T Float](t *testing.T) {
	for _, n := range []int{1, 7, 20001} {
		r := newRNG(uint64(n))
		p := randSlice[T](r, n, -1, 1)
		m, v := make([]T, n), make([]T, n)
		rp, rm, rv := to64(p), make([]float64, n), make([]float64, n)
		const lr, b1, b2, eps, wd = 1e-3, 0.9, 0.95, 1e-8, 0.1
		for step := 1; step <= 5; step++ {
			g := randSlice[T](r, n, -1, 1)
			AdamW(p, g, m, v, lr, b1, b2, eps, wd, step)
			for i := range rp { // PyTorch's _single_tensor_adamw, in float64
				rp[i] *= 1 - lr*wd
				rm[i] += (1 - b1) * (float64(g[i]) - rm[i])
				rv[i] = b2*rv[i] + (1-b2)*float64(g[i])*float64(g[i])
				bc1, bc2 := 1-math.Pow(b1, float64(step)), 1-math.Pow(b2, float64(step))
				rp[i] -= lr / bc1 * rm[i] / (math.Sqrt(rv[i])/math.Sqrt(bc2) + eps)
			}
		}
		requireClose(t, "p", p, rp, tol[T](1e-6, 1e-14), tol[T](1e-7, 1e-15))
		requireClose(t, "m", m, rm, tol[T](1e-6, 1e-14), tol[T](1e-7, 1e-16)) // m cancels: O(0.1) terms
		requireClose(t, "v", v, rv, tol[T](1e-6, 1e-14), 0)
	}
	assert.Panics(t, func() { AdamW([]T{1}, []T{1}, []T{0}, []T{0}, 1, 0.9, 0.999, 1e-8, 0, 0) })
}

func TestSGDMatchesReference(t *testing.T) {
	testSGD[float32](t)
	testSGD[float64](t)
}

func testSGD[T Float](t *testing.T) {
	for _, c := range []struct {
		momentum, wd float64
		nesterov     bool
	}{{0, 0, false}, {0, 0.01, false}, {0.9, 0, false}, {0.9, 0.01, true}} {
		const n, lr = 70001, 0.05
		r := newRNG(uint64(c.momentum*10) + uint64(c.wd*1000))
		p := randSlice[T](r, n, -1, 1)
		var buf []T
		if c.momentum != 0 {
			buf = make([]T, n)
		}
		rp, rb := to64(p), []float64(nil)
		for step := 0; step < 4; step++ {
			g := randSlice[T](r, n, -1, 1)
			SGD(p, g, buf, lr, c.momentum, c.wd, c.nesterov)
			for i := range rp { // torch.optim.SGD, in float64
				d := float64(g[i]) + c.wd*rp[i]
				if c.momentum != 0 {
					if rb == nil {
						rb = make([]float64, n)
					}
					if step == 0 {
						rb[i] = d // PyTorch: buf = clone(d) on the first step
					} else {
						rb[i] = c.momentum*rb[i] + d
					}
					if c.nesterov {
						d += c.momentum * rb[i]
					} else {
						d = rb[i]
					}
				}
				rp[i] -= lr * d
			}
		}
		requireClose(t, "p", p, rp, tol[T](1e-6, 1e-14), tol[T](1e-7, 1e-15))
		if c.momentum != 0 {
			requireClose(t, "buf", buf, rb, tol[T](1e-6, 1e-14), tol[T](1e-7, 1e-15))
		}
	}
	require.PanicsWithValue(t, "cpukern.SGD: nesterov momentum requires a momentum", func() {
		SGD([]T{1}, []T{1}, nil, 0.1, 0, 0, true)
	})
}
