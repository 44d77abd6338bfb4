package tensor

import "math"

// scaleAll scales each tensor as ScaleInPlace does (the CPU gains nothing
// from one pass over all of them).
func (c cpuBackend) scaleAll(ts []*Tensor, alpha float64) {
	for _, t := range ts {
		c.affine(t, t, alpha, 0)
	}
}

func (cpuBackend) unscaleCheck(ts []*Tensor, inv float64) bool {
	finite := true
	s := float32(inv)
	for _, t := range ts {
		x := f32(t)
		for i, v := range x {
			if math.IsInf(float64(v), 0) || v != v {
				finite = false
			}
			x[i] = v * s
		}
	}
	return finite
}
