package tensor

// multiTensor is implemented by backends that run multi-tensor primitives
// (one pass, on a GPU one launch, over a list of tensors).
type multiTensor interface {
	// unscaleCheck multiplies every element of ts (contiguous float32
	// tensors) by inv in place and reports whether all the products are
	// finite (a non-finite element, or one that overflowed as multiplied).
	unscaleCheck(ts []*Tensor, inv float64) bool
	// scaleAll multiplies every element of ts (contiguous float32
	// tensors) by alpha in place, without waiting for the device.
	scaleAll(ts []*Tensor, alpha float64)
}

// ScaleAll multiplies every tensor of ts by alpha in place, as
// ScaleInPlace does each (the same bits: one rounding of v times alpha
// rounded to the dtype), but contiguous float32 tensors of a device with
// multi-tensor kernels in one pass: on a GPU one launch for all of them
// (gradient clipping scales every gradient: GPT-2's 148 were 148
// launches). Half tensors (bf16 or fp16 gradients) are scaled through
// float32, one at a time: their value times alpha rounded once to their
// dtype. It does not wait for the device. Nil tensors are skipped;
// the rest must be live floating-point tensors, contiguous, no two
// sharing an element (ErrArgument: one launch scales them in parallel);
// panics with an *OpError otherwise, before scaling any.
func ScaleAll(ts []*Tensor, alpha float64) {
	const op = "ScaleAll"
	byDev := map[Device][]*Tensor{}
	var devs []Device
	for _, t := range ts { // every tensor checked before any is scaled
		if t == nil {
			continue
		}
		t.live(op)
		sameFloat(op, t)
		if !t.IsContiguous() {
			fail(op, ErrArgument, "tensor must be contiguous (strides %v)", t.strides)
		}
	}
	disjoint(op, "the tensors", ts, nil)
	modified(ts...)
	for _, t := range ts {
		if t == nil {
			continue
		}
		if t.dtype.IsHalf() {
			scaleHalf(t, alpha)
			continue
		}
		if _, multi := t.dev.backend().(multiTensor); !multi || t.dtype != Float32 {
			t.dev.backend().affine(t, t, alpha, 0)
			continue
		}
		if _, ok := byDev[t.dev]; !ok {
			devs = append(devs, t.dev)
		}
		byDev[t.dev] = append(byDev[t.dev], t)
	}
	for _, d := range devs {
		d.backend().(multiTensor).scaleAll(byDev[d], alpha)
	}
}

// UnscaleGrads multiplies every tensor of ts by inv in place and reports
// whether all the products are finite: no element was inf or NaN before,
// and none overflowed as it was multiplied (inv above 1) (the gradient scaler's
// fused unscale and inf/NaN check: on a GPU one kernel launch for all
// tensors and one synchronization). Nil tensors are skipped. The tensors
// must be contiguous float32 on one device, no two sharing an element
// (ErrArgument); panics with an *OpError otherwise.
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
	disjoint(op, "the non-nil gradients", live, nil)
	modified(live...)
	if len(live) == 0 {
		return true
	}
	mt, ok := live[0].dev.backend().(multiTensor)
	if !ok {
		fail(op, ErrDevice, "%v has no multi-tensor kernels", live[0].dev)
	}
	return mt.unscaleCheck(live, inv)
}
