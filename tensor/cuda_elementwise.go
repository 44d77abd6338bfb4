package tensor

import (
	"math"

	"github.com/strata-ml/strata/cuda"
	"github.com/strata-ml/strata/tensor/internal/layout"
)

func (b cudaBackend) unary(op UnaryOp, dst, src *Tensor) {
	d, n, name := b.d, dst.Numel(), op.String()
	f := floatIndex(name, dst.dtype)
	if n == 0 {
		return
	}
	d.launchVec(name, d.k.unary[f], n, dst.dtype.Size(), func(a *cuda.Args) {
		a.Int32(int32(op)).Ptr(devPtr(dst)).Ptr(devPtr(src)).Int64(int64(n))
	})
}

// unaryTo runs unary_to_f32_f16 or _bf16 (four float32 values a thread
// in, four halves out), or for a half src unary_to_f16_f16 or
// _bf16_bf16 (eight halves in and out, computed in float32).
func (b cudaBackend) unaryTo(op UnaryOp, dst, src *Tensor) {
	d, n, name := b.d, dst.Numel(), op.String()
	if n == 0 {
		return
	}
	h := 0
	if dst.dtype == BFloat16 {
		h = 1
	}
	fn, size := d.k.unaryTo[h], 4
	if src.dtype.IsHalf() {
		fn, size = d.k.unaryHalf[h], 2
	}
	d.launchVec(name, fn, n, size, func(a *cuda.Args) {
		a.Int32(int32(op)).Ptr(devPtr(dst)).Ptr(devPtr(src)).Int64(int64(n))
	})
}

func (b cudaBackend) unaryBackward(op UnaryOp, dx, x, y, dy *Tensor) {
	d, n, name := b.d, dx.Numel(), op.String()+"Backward"
	f := floatIndex(name, dx.dtype)
	if n == 0 {
		return
	}
	d.launchVec(name, d.k.unaryBackward[f], n, dx.dtype.Size(), func(a *cuda.Args) {
		a.Int32(int32(op)).Ptr(devPtr(dx)).Ptr(devPtr(x)).Ptr(devPtr(y)).Ptr(devPtr(dy)).Int64(int64(n))
	})
}

// unaryBackwardTo runs unary_backward_to_f32_f16 or _bf16 (four float32
// values of dy a thread in, four halves of dx out), or for x and y saved
// in the half type unary_backward_half_f16 or _bf16.
func (b cudaBackend) unaryBackwardTo(op UnaryOp, dx, x, y, dy *Tensor) {
	d, n, name := b.d, dx.Numel(), op.String()+"Backward"
	if n == 0 {
		return
	}
	h := 0
	if dx.dtype == BFloat16 {
		h = 1
	}
	fn := d.k.unaryBackwardTo[h]
	if savedHalf(x, y) {
		fn = d.k.unaryBackwardHalf[h]
	}
	d.launchVec(name, fn, n, 4, func(a *cuda.Args) {
		a.Int32(int32(op)).Ptr(devPtr(dx)).Ptr(devPtr(x)).Ptr(devPtr(y)).Ptr(devPtr(dy)).Int64(int64(n))
	})
}

// savedHalf reports whether the saved x or y of a unary backward (either
// may be nil) is in a half type.
func savedHalf(x, y *Tensor) bool {
	return (x != nil && x.dtype.IsHalf()) || (y != nil && y.dtype.IsHalf())
}

// affine computes alpha*src, then adds beta when it is not 0, each step
// rounded to the dtype as on the CPU.
func (b cudaBackend) affine(dst, src *Tensor, alpha, beta float64) {
	d, n := b.d, dst.Numel()
	f := floatIndex("Affine", dst.dtype)
	if n == 0 {
		return
	}
	d.launchVec("Affine", d.k.affine[f], n, dst.dtype.Size(), func(a *cuda.Args) {
		argT(argT(a.Ptr(devPtr(dst)).Ptr(devPtr(src)).Int64(int64(n)), f, alpha), f, beta)
	})
}

// binary runs the contiguous kernel when both operands are plain
// contiguous runs after merging dims, else the strided one.
func (b cudaBackend) binary(op BinaryOp, dst, x, y *Tensor, l layout.Layout) {
	d, n, name := b.d, dst.Numel(), binaryName(op)
	f := floatIndex(name, dst.dtype)
	if n == 0 {
		return
	}
	if !cudaLayoutFits(&l) {
		fail(name, ErrShape, "operands of shape %v have %d dims that cannot be merged; the cuda kernels take at most %d",
			dst.shape, l.NDim, cudaMaxDims)
	}
	if l.Contiguous(2) {
		d.launchVec(name, d.k.binary[f], n, dst.dtype.Size(), func(a *cuda.Args) {
			a.Int32(int32(op)).Ptr(devPtr(dst)).Ptr(devPtr(x)).Ptr(devPtr(y)).Int64(int64(n))
		})
		return
	}
	if x, row, swap, cols, ok := rowBroadcast(&l, x, y); ok {
		d.launchVec(name, d.k.binaryRowB[f], n, dst.dtype.Size(), func(a *cuda.Args) {
			a.Int32(int32(op)).Ptr(devPtr(dst)).Ptr(devPtr(x)).Ptr(devPtr(row)).Int64(int64(n)).Int64(int64(cols)).Int32(boolArg(swap))
		})
		return
	}
	var buf [8 + 24*8]byte
	d.launch1(name, d.k.binaryStrided[f][indexVariant(n)], n, func(a *cuda.Args) {
		a.Int32(int32(op)).Ptr(devPtr(dst)).Ptr(devPtr(x)).Ptr(devPtr(y)).Int64(int64(n)).Bytes(layoutBytes2(&l, &buf), 8)
	})
}

func (b cudaBackend) causalMask(dst, src *Tensor, batch, rows, cols int, fill float64) {
	d, n := b.d, batch*rows*cols
	f := floatIndex("CausalMask", dst.dtype)
	if n == 0 {
		return
	}
	d.launch1("CausalMask", d.k.causalMask[f], n, func(a *cuda.Args) {
		argT(a.Ptr(devPtr(dst)).Ptr(devPtr(src)).Int64(int64(n)).Int64(int64(rows)).Int64(int64(cols)), f, fill)
	})
}

// dropout draws the CPU's Philox mask (kernels/dropout.cuh): the same
// (seed, offset) drops the same elements on every device.
func (b cudaBackend) dropout(dst, src *Tensor, p float64, seed, offset uint64) {
	b.d.refuseDropout("Dropout", p)
	d, n := b.d, dst.Numel()
	f := floatIndex("Dropout", dst.dtype)
	if n == 0 {
		return
	}
	if p == 0 {
		d.copyDevice("Dropout", devPtr(dst), devPtr(src), n*dst.dtype.Size())
		return
	}
	thr := uint64(math.Ceil(p * 0x1p32))
	scale := 1 / (1 - p) // rounded to T by argT, as the CPU's T(1/(1-p))
	d.launch1("Dropout", d.k.dropout[f], ceilDiv(n+int(offset&3), 4), func(a *cuda.Args) {
		argT(a.Ptr(devPtr(dst)).Ptr(devPtr(src)).Int64(int64(n)).Uint64(seed).Uint64(offset).Uint64(thr), f, scale)
	})
}

// rowBroadcast recognises a bias add: after merging, two dims (rows,
// cols), one operand contiguous and the other a (cols) row repeated over
// the rows (strides 0 and 1). It returns the contiguous operand, the row,
// and whether the row is the first operand.
func rowBroadcast(l *layout.Layout, x, y *Tensor) (full, row *Tensor, swap bool, cols int, ok bool) {
	if l.NDim != 2 {
		return nil, nil, false, 0, false
	}
	cols = l.Shape[1]
	contig := func(o int) bool { return l.Strides[o][0] == cols && l.Strides[o][1] == 1 }
	bcast := func(o int) bool { return l.Strides[o][0] == 0 && l.Strides[o][1] == 1 }
	switch {
	case contig(0) && bcast(1):
		return x, y, false, cols, true
	case bcast(0) && contig(1):
		return y, x, true, cols, true
	}
	return nil, nil, false, 0, false
}
