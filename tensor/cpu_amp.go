package tensor

import "math"

// scaleAll scales each tensor as ScaleInPlace does (the CPU gains nothing
// from one pass over all of them).
func (c cpuBackend) scaleAll(ts []*Tensor, alpha float64) {
	for _, t := range ts {
		c.affine(t, t, alpha, 0)
	}
}

// unscaleCheck tests each product: a non-finite element stays non-finite
// (inv is finite and non-zero), and a finite one that overflows as it is
// multiplied (inv above 1) is caught in the same pass.
func (cpuBackend) unscaleCheck(ts []*Tensor, inv float64) bool {
	finite := true
	s := float32(inv)
	for _, t := range ts {
		x := f32(t)
		for i, v := range x {
			r := v * s
			if math.IsInf(float64(r), 0) || r != r {
				finite = false
			}
			x[i] = r
		}
	}
	return finite
}
