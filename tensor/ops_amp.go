package tensor

// multiTensor is implemented by backends that run multi-tensor primitives
// (one pass, on a GPU one launch, over a list of tensors).
type multiTensor interface {
	// unscaleCheck multiplies every element of ts (contiguous float32
	// tensors) by inv in place and reports whether all were finite before.
	unscaleCheck(ts []*Tensor, inv float64) bool
}

// UnscaleGrads multiplies every tensor of ts by inv in place and reports
// whether all their elements were finite before (the gradient scaler's
// fused unscale and inf/NaN check: on a GPU one kernel launch for all
// tensors and one synchronization). Nil tensors are skipped. The tensors
// must be contiguous float32 on one device; panics with an *OpError
// otherwise.
func UnscaleGrads(ts []*Tensor, inv float64) bool {
	const op = "UnscaleGrads"
	var live []*Tensor
	for _, t := range ts {
		if t == nil {
			continue
		}
		t.live(op)
		if t.dtype != Float32 || !t.IsContiguous() {
			fail(op, ErrDType, "gradient %v %v: want contiguous float32", t.dtype, t.shape)
		}
		if len(live) > 0 && t.dev != live[0].dev {
			fail(op, ErrDevice, "gradients on %v and %v", live[0].dev, t.dev)
		}
		live = append(live, t)
	}
	if len(live) == 0 {
		return true
	}
	mt, ok := live[0].dev.backend().(multiTensor)
	if !ok {
		fail(op, ErrDevice, "%v has no multi-tensor kernels", live[0].dev)
	}
	return mt.unscaleCheck(live, inv)
}
