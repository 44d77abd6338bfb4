package tensor

import (
	"sync"

	"github.com/strata-ml/strata/tensor/internal/blas"
	"github.com/strata-ml/strata/tensor/internal/cpukern"
	"github.com/strata-ml/strata/tensor/internal/layout"
)

func (cpuBackend) upload(dst *Tensor, src []byte) {
	copy(hostData[byte](byteView(dst)), src)
}

func (cpuBackend) download(dst []byte, src *Tensor) {
	copy(dst, hostData[byte](byteView(src)))
}

// byteView reinterprets contiguous t as a byte tensor descriptor (only
// offset and length are used by hostData).
func byteView(t *Tensor) *Tensor {
	sz := t.dtype.Size()
	return &Tensor{ref: t.ref, shape: []int{t.Numel() * sz}, offset: t.offset * sz}
}

func (cpuBackend) copyStrided(dst, src *Tensor, l layout.Layout) {
	switch src.dtype.Size() {
	case 2:
		cpukern.CopyStrided(hostData[uint16](dst), &l, hostAll[uint16](src), src.offset)
	case 4:
		cpukern.CopyStrided(hostData[uint32](dst), &l, hostAll[uint32](src), src.offset)
	case 8:
		cpukern.CopyStrided(hostData[uint64](dst), &l, hostAll[uint64](src), src.offset)
	}
}

func (cpuBackend) copy2D(dst, src *Tensor, rows, width, dstStride, dstOff, srcStride, srcOff int) {
	sz := dst.dtype.Size()
	d, s := hostData[byte](byteView(dst)), hostData[byte](byteView(src))
	w := width * sz
	for r := range rows {
		do, so := (r*dstStride+dstOff)*sz, (r*srcStride+srcOff)*sz
		copy(d[do:do+w], s[so:so+w])
	}
}

func (cpuBackend) fill(dst *Tensor, v float64) {
	switch dst.dtype {
	case Float32:
		cpukern.Fill(f32(dst), float32(v))
	case Float64:
		cpukern.Fill(f64(dst), v)
	case Int32:
		cpukern.Fill(i32(dst), int32Of(v))
	case Float16, BFloat16:
		cpukern.Fill(hostData[uint16](dst), halfBits(dst.dtype, v))
	}
}

// int32Of is v converted to int32 as Cast converts it (truncated toward
// zero, saturated, NaN giving 0; Go's int32(v) is unspecified out of
// range): the int32 fill value of both backends.
func int32Of(v float64) int32 {
	i := []int32{0}
	cpukern.Convert(i, []float64{v})
	return i[0]
}

// halfBits is v rounded to the half dtype dt, as its bits (the fill value
// of both backends).
func halfBits(dt DType, v float64) uint16 {
	h, one := []uint16{0}, []float32{float32(v)}
	if dt == Float16 {
		cpukern.F32ToF16(h, one)
	} else {
		cpukern.F32ToBF16(h, one)
	}
	return h[0]
}

func (cpuBackend) cast(dst, src *Tensor) {
	switch {
	case src.dtype == dst.dtype:
		copy(hostData[byte](byteView(dst)), hostData[byte](byteView(src)))
	case src.dtype.IsHalf() && dst.dtype == Float32:
		halfToF32(f32(dst), src)
	case dst.dtype.IsHalf() && src.dtype == Float32:
		f32ToHalf(dst, f32(src))
	case src.dtype.IsHalf() || dst.dtype.IsHalf():
		castVia32(dst, src)
	default:
		switch dst.dtype {
		case Float32:
			convertTo(f32(dst), src)
		case Float64:
			convertTo(f64(dst), src)
		case Int32:
			convertTo(i32(dst), src)
		}
	}
}

// castChunk is the float32 elements castVia32 converts at a time: a
// buffer that stays in the L1 cache.
const castChunk = 2048

// castGrain is the elements below which castVia32 stays on the calling
// goroutine (cpukern's grain of memory-bound loops).
const castGrain = 1 << 16

// castBufs recycles castVia32's chunk buffers.
var castBufs = sync.Pool{New: func() any { return new([castChunk]float32) }}

// castVia32 converts contiguous src into dst of the same length where one
// of them is float16 or bfloat16 and the other is neither float32 nor
// the same dtype: through float32, a chunk of castChunk elements at a
// time, so that no float32 copy of the whole tensor is made (memory no
// budget would see); each element goes through the same two conversions
// as a whole-tensor copy would, so the bits are the same.
func castVia32(dst, src *Tensor) {
	var widen func(buf []float32, lo int)
	switch src.dtype {
	case Float16, BFloat16:
		s, f16 := hostData[uint16](src), src.dtype == Float16
		widen = func(buf []float32, lo int) { widenHalf(f16, buf, s[lo:lo+len(buf)]) }
	case Float64:
		s := f64(src)
		widen = func(buf []float32, lo int) { cpukern.Convert(buf, s[lo:lo+len(buf)]) }
	case Int32:
		s := i32(src)
		widen = func(buf []float32, lo int) { cpukern.Convert(buf, s[lo:lo+len(buf)]) }
	}
	var narrow func(lo int, buf []float32)
	switch dst.dtype {
	case Float16, BFloat16:
		d, f16 := hostData[uint16](dst), dst.dtype == Float16
		narrow = func(lo int, buf []float32) { narrowHalf(f16, d[lo:lo+len(buf)], buf) }
	case Float64:
		d := f64(dst)
		narrow = func(lo int, buf []float32) { cpukern.Convert(d[lo:lo+len(buf)], buf) }
	case Int32:
		d := i32(dst)
		narrow = func(lo int, buf []float32) { cpukern.Convert(d[lo:lo+len(buf)], buf) }
	}
	cpukern.ParallelFor(src.Numel(), castGrain, func(lo, hi int) {
		p := castBufs.Get().(*[castChunk]float32)
		defer castBufs.Put(p)
		for i := lo; i < hi; i += castChunk {
			buf := p[:min(castChunk, hi-i)]
			widen(buf, i)
			narrow(i, buf)
		}
	})
}

// widenHalf widens float16 (f16) or bfloat16 bits to float32.
func widenHalf(f16 bool, dst []float32, src []uint16) {
	if f16 {
		cpukern.F16ToF32(dst, src)
	} else {
		cpukern.BF16ToF32(dst, src)
	}
}

// narrowHalf rounds float32 to float16 (f16) or bfloat16 bits.
func narrowHalf(f16 bool, dst []uint16, src []float32) {
	if f16 {
		cpukern.F32ToF16(dst, src)
	} else {
		cpukern.F32ToBF16(dst, src)
	}
}

// halfToF32 widens half src's elements into dst.
func halfToF32(dst []float32, src *Tensor) {
	widenHalf(src.dtype == Float16, dst, hostData[uint16](src))
}

// f32ToHalf rounds src into half dst's elements.
func f32ToHalf(dst *Tensor, src []float32) {
	narrowHalf(dst.dtype == Float16, hostData[uint16](dst), src)
}

// convertTo converts non-half src into dst.
func convertTo[D float32 | float64 | int32](dst []D, src *Tensor) {
	switch src.dtype {
	case Float32:
		cpukern.Convert(dst, f32(src))
	case Float64:
		cpukern.Convert(dst, f64(src))
	case Int32:
		cpukern.Convert(dst, i32(src))
	}
}

func (cpuBackend) unary(op UnaryOp, dst, src *Tensor) {
	onFloat(op.String(), dst.dtype,
		func() { cpukern.Unary(op, f32(dst), f32(src)) },
		func() { cpukern.Unary(op, f64(dst), f64(src)) })
}

// unaryTo is unary into a float32 temporary, then cast: the same bits.
// A half src is widened to float32 first (exact), as the kernel widens it.
func (c cpuBackend) unaryTo(op UnaryOp, dst, src *Tensor) {
	src, done := c.widened(src)
	defer done()
	c.through(op.String(), dst, src.dtype, func(tmp *Tensor) { c.unary(op, tmp, src) })
}

// through computes dst's values into a temporary of dtype dt and casts
// them into dst: the same bits as the op in dt followed by To.
func (c cpuBackend) through(op string, dst *Tensor, dt DType, compute func(tmp *Tensor)) {
	tmp := mustNew(op, ctxOf(op, dst), dst.dev, dt, dst.shape)
	defer tmp.Release()
	compute(tmp)
	c.cast(dst, tmp)
}

// widened returns t, or for a half t a float32 copy, and what releases it.
func (c cpuBackend) widened(t *Tensor) (*Tensor, func()) {
	if t == nil || !t.dtype.IsHalf() {
		return t, func() {}
	}
	w := mustNew("Cast", ctxOf("Cast", t), t.dev, Float32, t.shape)
	c.cast(w, t)
	return w, w.Release
}

func (cpuBackend) unaryBackward(op UnaryOp, dx, x, y, dy *Tensor) {
	onFloat(op.String()+"Backward", dx.dtype,
		func() { cpukern.UnaryBackward(op, f32(dx), opt32(x), opt32(y), f32(dy)) },
		func() { cpukern.UnaryBackward(op, f64(dx), opt64(x), opt64(y), f64(dy)) })
}

// unaryBackwardTo is unaryBackward into a float32 temporary, then cast:
// the same bits.
func (c cpuBackend) unaryBackwardTo(op UnaryOp, dx, x, y, dy *Tensor) {
	name := op.String() + "Backward"
	x, doneX := c.widened(x) // saved in the half type: widened, as the kernel reads them
	defer doneX()
	y, doneY := c.widened(y)
	defer doneY()
	c.through(name, dx, dy.dtype, func(tmp *Tensor) { c.unaryBackward(op, tmp, x, y, dy) })
}

func (cpuBackend) affine(dst, src *Tensor, alpha, beta float64) {
	onFloat("Affine", dst.dtype,
		func() {
			d, s := f32(dst), f32(src)
			cpukern.Scale(d, s, float32(alpha))
			if beta != 0 {
				cpukern.AddScalar(d, d, float32(beta))
			}
		},
		func() {
			d, s := f64(dst), f64(src)
			cpukern.Scale(d, s, alpha)
			if beta != 0 {
				cpukern.AddScalar(d, d, beta)
			}
		})
}

func (cpuBackend) binary(op BinaryOp, dst, a, b *Tensor, l layout.Layout) {
	onFloat(binaryName(op), dst.dtype,
		func() { cpukern.Binary(op, f32(dst), &l, hostAll[float32](a), a.offset, hostAll[float32](b), b.offset) },
		func() { cpukern.Binary(op, f64(dst), &l, hostAll[float64](a), a.offset, hostAll[float64](b), b.offset) })
}

func (cpuBackend) reduceSum(dst, src *Tensor, outer, mid, inner int, acc bool) {
	onFloat("Sum", dst.dtype,
		func() { cpukern.ReduceSum(f32(dst), f32(src), outer, mid, inner, acc) },
		func() { cpukern.ReduceSum(f64(dst), f64(src), outer, mid, inner, acc) })
}

func (cpuBackend) reduceMax(dst, src *Tensor, outer, mid, inner int) {
	onFloat("Max", dst.dtype,
		func() { cpukern.ReduceMax(f32(dst), f32(src), outer, mid, inner) },
		func() { cpukern.ReduceMax(f64(dst), f64(src), outer, mid, inner) })
}

// sumSquares widens half tensors (bf16 or fp16 gradients) to float32 a
// bounded group at a time (ops_half_widen.go): the CPU's kernels read
// float32 and float64 only.
func (cpuBackend) sumSquares(srcs []*Tensor) float64 {
	var r float64
	widenGroups(srcs, func(lo, hi int) {
		wide, release := widened(srcs[lo:hi])
		defer release()
		for _, t := range wide {
			r += sumSquares(t)
		}
	})
	return r
}

func sumSquares(src *Tensor) float64 {
	var r float64
	onFloat("SumSquares", src.dtype,
		func() { r = cpukern.SumSquares(f32(src)) },
		func() { r = cpukern.SumSquares(f64(src)) })
	return r
}

func (cpuBackend) matmul(c, a, b *Tensor, tA, tB bool, m, n, k, batch, sA, sB int, alpha, beta float64, _ bool) {
	lda, ldb := k, n
	if tA {
		lda = m
	}
	if tB {
		ldb = k
	}
	if a.dtype.IsHalf() {
		matmulHalf(c, a, b, tA, tB, m, n, k, batch, lda, ldb, sA, sB, alpha, beta)
		return
	}
	onFloat("MatMul", c.dtype,
		func() {
			blas.SgemmStridedBatched(tA, tB, m, n, k, float32(alpha), f32(a), lda, sA, f32(b), ldb, sB, float32(beta), f32(c), n, m*n, batch)
		},
		func() {
			blas.DgemmStridedBatched(tA, tB, m, n, k, alpha, f64(a), lda, sA, f64(b), ldb, sB, beta, f64(c), n, m*n, batch)
		})
}

func (cpuBackend) softmax(dst, src *Tensor, rows, cols int, log bool) {
	onFloat("Softmax", dst.dtype,
		func() {
			if log {
				cpukern.LogSoftmax(f32(dst), f32(src), rows, cols)
			} else {
				cpukern.Softmax(f32(dst), f32(src), rows, cols)
			}
		},
		func() {
			if log {
				cpukern.LogSoftmax(f64(dst), f64(src), rows, cols)
			} else {
				cpukern.Softmax(f64(dst), f64(src), rows, cols)
			}
		})
}

func (cpuBackend) softmaxBackward(dx, y, dy *Tensor, rows, cols int, log bool) {
	onFloat("SoftmaxBackward", dx.dtype,
		func() {
			if log {
				cpukern.LogSoftmaxBackward(f32(dx), f32(y), f32(dy), rows, cols)
			} else {
				cpukern.SoftmaxBackward(f32(dx), f32(y), f32(dy), rows, cols)
			}
		},
		func() {
			if log {
				cpukern.LogSoftmaxBackward(f64(dx), f64(y), f64(dy), rows, cols)
			} else {
				cpukern.SoftmaxBackward(f64(dx), f64(y), f64(dy), rows, cols)
			}
		})
}

func (cpuBackend) causalSoftmax(dst, src *Tensor, batch, rows, cols int) {
	onFloat("CausalSoftmax", dst.dtype,
		func() { cpukern.CausalSoftmax(f32(dst), f32(src), batch, rows, cols) },
		func() { cpukern.CausalSoftmax(f64(dst), f64(src), batch, rows, cols) })
}

func (cpuBackend) causalSoftmaxBackward(dx, y, dy *Tensor, batch, rows, cols int) {
	onFloat("CausalSoftmaxBackward", dx.dtype,
		func() { cpukern.CausalSoftmaxBackward(f32(dx), f32(y), f32(dy), batch, rows, cols) },
		func() { cpukern.CausalSoftmaxBackward(f64(dx), f64(y), f64(dy), batch, rows, cols) })
}

func (cpuBackend) causalMask(dst, src *Tensor, batch, rows, cols int, fill float64) {
	onFloat("CausalMask", dst.dtype,
		func() { cpukern.CausalMask(f32(dst), f32(src), batch, rows, cols, float32(fill)) },
		func() { cpukern.CausalMask(f64(dst), f64(src), batch, rows, cols, fill) })
}

func (c cpuBackend) layerNorm(y, mean, rstd, x, w, b *Tensor, rows, cols int, eps float64) {
	if y.dtype != x.dtype { // a half y of float32 x: computed in float32, then cast (the same bits)
		c.through("LayerNorm", y, x.dtype, func(tmp *Tensor) { c.layerNorm(tmp, mean, rstd, x, w, b, rows, cols, eps) })
		return
	}
	onFloat("LayerNorm", y.dtype,
		func() { cpukern.LayerNorm(f32(y), f32(mean), f32(rstd), f32(x), opt32(w), opt32(b), rows, cols, eps) },
		func() { cpukern.LayerNorm(f64(y), f64(mean), f64(rstd), f64(x), opt64(w), opt64(b), rows, cols, eps) })
}

// layerNormBackward zeroes dw and db first: the kernel accumulates into
// them.
func (c cpuBackend) layerNormBackward(dx, dw, db, dy, x, mean, rstd, w *Tensor, rows, cols int) {
	for _, t := range []*Tensor{dw, db} {
		if t != nil {
			c.fill(t, 0)
		}
	}
	onFloat("LayerNormBackward", dx.dtype,
		func() {
			cpukern.LayerNormBackward(f32(dx), opt32(dw), opt32(db), f32(dy), f32(x), f32(mean), f32(rstd), opt32(w), rows, cols)
		},
		func() {
			cpukern.LayerNormBackward(f64(dx), opt64(dw), opt64(db), f64(dy), f64(x), f64(mean), f64(rstd), opt64(w), rows, cols)
		})
}

func (cpuBackend) gather(dst, table, ids *Tensor, dim, rows int) error {
	switch table.dtype.Size() {
	case 2:
		return cpukern.Gather(hostData[uint16](dst), hostData[uint16](table), i32(ids), dim, rows)
	case 8:
		return cpukern.Gather(hostData[uint64](dst), hostData[uint64](table), i32(ids), dim, rows)
	default:
		return cpukern.Gather(hostData[uint32](dst), hostData[uint32](table), i32(ids), dim, rows)
	}
}

func (cpuBackend) scatterAdd(dtable, dout, ids *Tensor, dim, rows int) error {
	var err error
	onFloat("EmbeddingBackward", dtable.dtype,
		func() { err = cpukern.ScatterAdd(f32(dtable), f32(dout), i32(ids), dim, rows) },
		func() { err = cpukern.ScatterAdd(f64(dtable), f64(dout), i32(ids), dim, rows) })
	return err
}

func (cpuBackend) crossEntropy(loss, logits, targets *Tensor, rows, cols, ld int, ignore int32) (int, error) {
	var n int
	var err error
	onFloat("CrossEntropy", logits.dtype,
		func() { n, err = cpukern.CrossEntropyLD(f32(loss), f32(logits), i32(targets), rows, cols, ld, ignore) },
		func() { n, err = cpukern.CrossEntropyLD(f64(loss), f64(logits), i32(targets), rows, cols, ld, ignore) })
	return n, err
}

// crossEntropyBackward fails (ErrArgument) on a target out of range, as
// crossEntropy does; the op releases its output.
func (cpuBackend) crossEntropyBackward(dlogits, logits, targets, dloss *Tensor, rows, cols, ld int, ignore int32) {
	var err error
	onFloat("CrossEntropyBackward", logits.dtype,
		func() {
			err = cpukern.CrossEntropyBackwardLD(f32(dlogits), f32(logits), i32(targets), f32(dloss), rows, cols, ld, ignore)
		},
		func() {
			err = cpukern.CrossEntropyBackwardLD(f64(dlogits), f64(logits), i32(targets), f64(dloss), rows, cols, ld, ignore)
		})
	if err != nil {
		fail("CrossEntropyBackward", ErrArgument, "%s", kernelFault(err))
	}
}

// crossEntropyFused is crossEntropy then crossEntropyBackward, the
// gradient cast to dlogits' dtype through a temporary in the logits'.
func (c cpuBackend) crossEntropyFused(loss, dlogits, logits, targets, dloss *Tensor, rows, cols, ld int, ignore int32) {
	op := "CrossEntropyFused"
	if logits.dtype.IsHalf() { // widened to float32 first, as the kernel widens as it reads
		wide, done := c.widened(logits)
		defer done()
		c.crossEntropyFused(loss, dlogits, wide, targets, dloss, rows, cols, ld, ignore)
		return
	}
	if _, err := c.crossEntropy(loss, logits, targets, rows, cols, ld, ignore); err != nil {
		fail(op, ErrArgument, "%s", kernelFault(err))
	}
	g := dlogits
	if g.dtype != logits.dtype {
		g = mustNew(op, ctxOf(op, logits), logits.dev, logits.dtype, logits.shape)
		defer g.Release()
	}
	c.crossEntropyBackward(g, logits, targets, dloss, rows, cols, ld, ignore)
	if g != dlogits {
		c.cast(dlogits, g)
	}
}

func (c cpuBackend) meanDivisor(dst, targets *Tensor, rows int, ignore int32) {
	n, _ := c.countTargets(targets, rows, ignore)
	c.fill(dst, float64(max(n, 1)))
}

func (cpuBackend) countTargets(targets *Tensor, rows int, ignore int32) (int, error) {
	n := 0
	for _, t := range i32(targets)[:rows] {
		if t != ignore {
			n++
		}
	}
	return n, nil
}

// matmulEpilogue: the CPU composes the product and the op instead.
func (cpuBackend) matmulEpilogue(c, a, b, vec *Tensor, tA, tB bool, m, n, k int, epi epilogue, tf32 bool) bool {
	return false
}

func (cpuBackend) dropout(dst, src *Tensor, p float64, seed, offset uint64) {
	onFloat("Dropout", dst.dtype,
		func() { cpukern.Dropout(f32(dst), f32(src), p, seed, offset) },
		func() { cpukern.Dropout(f64(dst), f64(src), p, seed, offset) })
}

func (cpuBackend) adamw(p, g, m, v *Tensor, lr, b1, b2, eps, wd float64, step int) {
	onFloat("AdamW", p.dtype,
		func() { cpukern.AdamW(f32(p), f32(g), f32(m), f32(v), lr, b1, b2, eps, wd, step) },
		func() { cpukern.AdamW(f64(p), f64(g), f64(m), f64(v), lr, b1, b2, eps, wd, step) })
}

// adamwMulti widens half gradients (bf16 or fp16, of float32 parameters)
// to float32 a bounded group at a time (ops_half_widen.go), each group's
// copies released once its parameters are updated.
func (c cpuBackend) adamwMulti(ps, gs, ms, vs []*Tensor, wd []float64, lr, b1, b2, eps float64, step int) {
	widenGroups(gs, func(lo, hi int) {
		g, release := widened(gs[lo:hi])
		defer release()
		for i := lo; i < hi; i++ {
			c.adamw(ps[i], g[i-lo], ms[i], vs[i], lr, b1, b2, eps, wd[i], step)
		}
	})
}

func (cpuBackend) sgd(p, g, buf *Tensor, lr, mom, wd float64, nesterov bool) {
	onFloat("SGD", p.dtype,
		func() { cpukern.SGD(f32(p), f32(g), opt32(buf), lr, mom, wd, nesterov) },
		func() { cpukern.SGD(f64(p), f64(g), opt64(buf), lr, mom, wd, nesterov) })
}
