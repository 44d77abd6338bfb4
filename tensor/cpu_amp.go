package tensor

import "math"

func (c cpuBackend) scaleAll(ts []*Tensor, alpha float64) { c.unscaleCheck(ts, alpha) }

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
