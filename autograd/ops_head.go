package autograd

import (
	"fmt"
	"slices"

	"github.com/strata-ml/strata/tensor"
)

// DefaultHeadChunkBytes is the size of the float32 logits of one chunk of
// LinearCrossEntropy when the caller gives no row count: 256 MiB, 1335
// rows of GPT-2's 50,257-token vocabulary (the same rows, half the bytes,
// when the logits are half under autocast), so each chunk's products are
// still large GEMMs.
const DefaultHeadChunkBytes = 256 << 20

// HeadPadding returns the row width the products of LinearCrossEntropy
// give the logits of v classes on dev: on CUDA devices, v rounded up to a
// multiple of 64 when v is not a multiple of 8, as nanoGPT and llm.c pad
// GPT-2's 50,257 tokens to 50,304. cuBLAS picks its tensor-core kernels
// for 16-byte-aligned rows only: on the H200 the three bfloat16 products
// of GPT-2's head (8192 x 50257 x 768) took 15.5 ms a step in the
// unaligned kernels. Elsewhere (the CPU's GEMMs do not care) it is v; a
// nil dev is the CPU, as nn.Options takes it.
func HeadPadding(dev tensor.Device, v int) int {
	if headPadAlways || (dev != nil && dev.Kind() == tensor.KindCUDA && v%8 != 0) {
		return (v + 63) / 64 * 64
	}
	return v
}

// headPadAlways pads on every device (tests of the padded path on the
// CPU).
var headPadAlways = false

// LinearCrossEntropy returns the mean cross-entropy of the logits h wᵀ
// against targets, without ever holding all the logits: a language
// model's output head and loss fused and chunked (as Liger's fused linear
// cross-entropy). h is (..., C), w (V, C), targets int32 of h's leading
// shape (another shape of as many elements is refused, as nn.CrossEntropy
// refuses it); targets equal to IgnoreIndex are not counted.
//
// The rows are taken chunkRows at a time (0: DefaultHeadChunkBytes of
// float32 logits a chunk). For each chunk the forward computes the logits,
// their loss and, when a gradient is wanted, at once their gradient
// (softmax - onehot), which it multiplies into the gradients of h (N, C)
// and w (V, C) and drops: backward only scales those two by the incoming
// gradient. The whole (N, V) logits and their gradient (3.2 GB in float32
// for GPT-2 at batch 8 by 1024) become one chunk's (256 MiB) plus the
// gradient of w held from the forward to the backward. The products follow
// autocast like Linear's: under a half-precision region h and w are cast
// (w once per region); the logits of a step that wants gradients come out
// in the region's dtype, as PyTorch's autocast makes them (the loss and
// its gradient are computed from them widened to float32, the gradient
// written in that dtype: tensor.CrossEntropyFused), half the bytes of
// float32 logits to write and read; without gradients (evaluation) they
// are float32.
//
// When HeadPadding widens the rows (products on tensor cores: under
// autocast or with TF32), w is copied once a call into a
// zero-padded (Vp, C) matrix in the products' dtype; the logits are
// (rows, Vp), the padded cross-entropy reads their first V columns, and
// its gradient, zero in the padding, enters both products as it is; the
// gradient of w is the first V rows of the padded one.
//
// The result equals CrossEntropy(Linear(h, w, nil), targets) up to the
// order of floating-point sums.
func LinearCrossEntropy(h, w *Var, targets *tensor.Tensor, chunkRows int) *Var {
	op := "LinearCrossEntropy"
	args(op, "h w", h, w)
	if targets == nil {
		panic(&tensor.OpError{Op: "autograd." + op, Msg: "targets: nil tensor", Err: tensor.ErrArgument})
	}
	hs, ws := h.Value.Shape(), w.Value.Shape()
	if len(hs) < 1 || len(ws) != 2 || hs[len(hs)-1] != ws[1] {
		panic(&tensor.OpError{Op: "autograd." + op, Msg: fmt.Sprintf("h %v, w %v: want (..., C) and (V, C)", hs, ws), Err: tensor.ErrShape})
	}
	C, V := ws[1], ws[0]
	N := leadingRows(hs) // not Numel / C: C may be 0
	switch {
	case V == 0:
		panic(&tensor.OpError{Op: "autograd." + op, Msg: fmt.Sprintf("w %v has no rows: want at least one class", ws), Err: tensor.ErrShape})
	case !slices.Equal(targets.Shape(), hs[:len(hs)-1]):
		panic(&tensor.OpError{Op: "autograd." + op, Msg: fmt.Sprintf("targets %v for h %v: want h's leading shape %v", targets.Shape(), hs, hs[:len(hs)-1]), Err: tensor.ErrShape})
	case targets.DType() != tensor.Int32:
		panic(&tensor.OpError{Op: "autograd." + op, Msg: fmt.Sprintf("targets of dtype %v: want int32 class indices", targets.DType()), Err: tensor.ErrDType})
	case chunkRows < 0:
		panic(&tensor.OpError{Op: "autograd." + op, Msg: fmt.Sprintf("chunk of %d rows", chunkRows), Err: tensor.ErrArgument})
	}
	// The op's context is its operands', the targets' included: that of
	// its output, where Record decides whether to record, also for h and
	// w kept (a chain of ops on parameters alone meeting the caller's data
	// here).
	pr := precisionOf(h.Value, w.Value, targets)
	c := pr.c
	if N == 0 {
		return noRowsLoss(op, pr, h, w)
	}
	grad := GradEnabledIn(c) && (needs(h) || needs(w))
	halfLogits := grad && pr.st.Enabled // logits in the region's dtype
	if chunkRows == 0 {
		// Sized by float32 logits also when they are half: doubling the
		// rows of a half chunk (the same bytes of logits) raised gpt2's
		// bf16 peak by 130 MiB (its gradient doubles too) and ran no
		// faster (session 9, call 5).
		chunkRows = max(1, DefaultHeadChunkBytes/(4*V))
	}
	chunkRows = min(chunkRows, N)

	// Only tensor-core products (autocast, TF32) pad: plain float32 GEMMs
	// ran as fast unpadded on the H200, and the padded copy of w would
	// cost its bytes for nothing.
	wv, vp := w.Value, V
	if pr.st.Enabled || pr.st.TF32 || headPadAlways {
		vp = HeadPadding(w.Value.Device(), V)
	}
	if vp != V {
		wv = paddedWeight(pr, w.Value, vp)
		defer wv.Release()
	}
	h2 := h.Value.Reshape(N, C)
	defer h2.Release()
	t1 := targets.Reshape(N)
	defer t1.Release()

	// The gradients of h and w are made by the first chunk, in the dtype
	// of its products (float32 under autocast), in the gradient role.
	var dh, dw, ones *tensor.Tensor
	defer func() {
		if ones != nil {
			ones.Release()
		}
	}()
	ps := pr.products()
	defer ps.release()
	var total *tensor.Tensor
	count := 0
	for start := 0; start < N; start += chunkRows {
		r := min(chunkRows, N-start)
		hc, tc := h2.Narrow(0, start, r), t1.Narrow(0, start, r)
		var logits *tensor.Tensor // (r, Vp)
		if halfLogits {
			logits = ps.mmHalfOut(hc, wv, false, true)
		} else {
			logits = ps.mm(hc, wv, false, true, 1)
		}
		var losses, dl *tensor.Tensor
		if grad {
			if ones == nil {
				c.WithRole(gradRole, func() {
					ones = c.Full(logits.Device(), tensor.AccumDType(logits.DType()), 1, chunkRows)
				})
			}
			one := ones.Narrow(0, 0, r)
			// The loss and softmax - onehot (0 in the padding) in one
			// pass, the latter in the products' dtype.
			losses, dl = tensor.CrossEntropyFused(logits, V, tc, one, IgnoreIndex, ps.dtype(logits))
			one.Release()
		} else {
			var n int
			losses, n = tensor.CrossEntropyPadded(logits, V, tc, IgnoreIndex)
			count += n
		}
		s := tensor.Sum(losses, false)
		losses.Release()
		if total == nil {
			total = s
		} else {
			total.AddInPlace(s)
			s.Release()
		}
		if grad {
			logits.Release()
			logits = nil
			if needs(h) {
				// Every chunk writes its rows of dh, the GEMM straight
				// into them: no zero fill, no copy.
				if dh == nil {
					c.WithRole(gradRole, func() { dh = c.Empty(h.Value.Device(), ps.outDType(dl), N, C) })
				}
				dst := dh.Narrow(0, start, r)
				ps.mmInto(dst, dl, wv, false, false, 0) // (r, Vp) @ (Vp, C)
				dst.Release()
			}
			if needs(w) {
				if dw == nil { // the first chunk's product starts the sum
					c.WithRole(gradRole, func() { dw = ps.mm(dl, hc, true, false, 1) }) // (Vp, r) @ (r, C)
				} else { // the others add theirs in the GEMM (beta 1): no add pass, no temporary
					ps.mmInto(dw, dl, hc, true, false, 1)
				}
			}
			ps.drop(dl)
			dl.Release()
		}
		if logits != nil {
			logits.Release()
		}
		ps.drop(hc)
		hc.Release()
		tc.Release()
	}
	if !grad {
		div := meanDivisor(total, count)
		out := tensor.Div(total, div)
		total.Release()
		div.Release()
		return Record(op, out, nil, nil)
	}
	// The mean's divisor, the count computed by the device: the forward
	// does not wait for it (a bad target the fused kernels met is raised
	// at the next synchronization, the caller's read of the loss). The
	// gradients are scaled by the incoming gradient over it in backward:
	// one pass over them, as before the count moved to the device.
	div := tensor.MeanDivisor(t1, IgnoreIndex, total.DType())
	out := tensor.Div(total, div)
	total.Release()
	saved := []*tensor.Tensor{div} // and the gradients: released after backward
	for _, g := range []*tensor.Tensor{dh, dw} {
		if g != nil {
			saved = append(saved, g)
		}
	}
	hdt := h.Value.DType()
	return Record(op, out, []*Var{h, w}, func(g *tensor.Tensor) []*tensor.Tensor {
		g1 := g.Reshape(1, 1)
		defer g1.Release()
		gs := tensor.Div(g1, div) // the incoming gradient over n
		defer gs.Release()
		// dh and dw are half for half h and w outside autocast (half
		// products): scaled in gs's dtype, as arithmetic runs in float32.
		scaled := func(d *tensor.Tensor) *tensor.Tensor {
			d, done := inDType(d, gs.DType())
			defer done()
			return tensor.Mul(d, gs)
		}
		var gh, gw *tensor.Tensor
		if dh != nil {
			p := scaled(dh)
			gh = retype(p.Reshape(hs...), hdt)
			p.Release()
		}
		if dw != nil {
			gw = scaled(dw)
			if vp != V {
				g := gw.Narrow(0, 0, V) // the padded rows' gradient is zero
				gw.Release()
				gw = g
			}
		}
		return []*tensor.Tensor{gh, gw}
	}, saved...).reads(0, false)
}

// noRowsLoss is LinearCrossEntropy of an h with no rows: no target
// counts, so the loss is 0, as CrossEntropy's is, and the gradients of h
// and w are zero.
func noRowsLoss(op string, pr precision, h, w *Var) *Var {
	dev := h.Value.Device()
	out := pr.c.Zeros(dev, tensor.AccumDType(pr.operandDType(h.Value)))
	return Record(op, out, []*Var{h, w}, func(g *tensor.Tensor) []*tensor.Tensor {
		grads := make([]*tensor.Tensor, 2)
		for i, in := range []*Var{h, w} {
			if needs(in) {
				grads[i] = tensor.CtxOf(g).Zeros(dev, in.Value.DType(), in.Value.Shape()...)
			}
		}
		return grads
	}).reads(0, false)
}

// paddedWeight returns w (V, C) as the products of pr multiply it, in
// the first V rows of a (vp, C) matrix whose other rows are zero.
func paddedWeight(pr precision, w *tensor.Tensor, vp int) *tensor.Tensor {
	dt := w.DType()
	if pr.st.Enabled && dt == tensor.Float32 {
		dt = pr.st.DType
	}
	V, C := w.Shape()[0], w.Shape()[1]
	wp := pr.c.Empty(w.Device(), dt, vp, C)
	top := wp.Narrow(0, 0, V)
	top.CopyFrom(w) // casts to the products' dtype
	top.Release()
	pad := wp.Narrow(0, V, vp-V) // only the padding rows need zeros
	pad.Fill(0)
	pad.Release()
	return wp
}
