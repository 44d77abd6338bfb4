package tensor_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/strata-ml/strata/memory/memtest"
	"github.com/strata-ml/strata/tensor"
)

// badCase is one op called with bad input: it must fail with an *OpError
// naming op and wrapping want, and leave nothing behind.
type badCase struct {
	name string
	op   string // the op the error names
	want error  // the sentinel it wraps
	run  func()
}

// TestBadInputFailsCleanly sweeps the exported ops on the CPU with bad
// input (a dtype the op does not run in, mismatched shapes, indices out of
// range, negative sizes, released and nil tensors): each must panic with
// an *OpError that tensor.Try returns (no runtime panic, no plain string),
// naming the op and wrapping the right sentinel, and release whatever it
// had allocated (the CPU's bytes in use and the open scope's tensors are
// what they were before).
func TestBadInputFailsCleanly(t *testing.T) {
	dev := tensor.CPU()
	f32 := func(shape ...int) *tensor.Tensor {
		n := 1
		for _, d := range shape {
			n *= d
		}
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(i%7) / 7
		}
		return tensor.FromFloat32s(dev, v, shape...)
	}
	x := f32(2, 3)
	x64 := x.To(tensor.Float64)
	h16 := x.To(tensor.Float16)
	bf := x.To(tensor.BFloat16)
	i32 := x.To(tensor.Int32)
	x4 := f32(4)
	x34 := f32(3, 4)
	sq := f32(3, 3)
	w3 := f32(3)
	rel := f32(2, 3)
	ids := tensor.FromInt32s(dev, []int32{0, 1}, 2)
	badIDs := tensor.FromInt32s(dev, []int32{0, 7}, 2)
	negIDs := tensor.FromInt32s(dev, []int32{-1, 0}, 2)
	table := f32(4, 3)
	table64 := table.To(tensor.Float64)
	loss2 := f32(2)
	// q, k, v of fused attention: (2 heads, T 4, hd 8).
	q := f32(2, 4, 8)
	lse := f32(2, 4)
	lse64 := lse.To(tensor.Float64)
	// One (B 1, T 4, 3C 24) q/k/v product of 2 heads of 4, its output and
	// log-sum-exp.
	qkv := f32(1, 4, 24)
	qkvI32 := qkv.To(tensor.Int32)
	qkvY, qkvLSE := f32(1, 4, 8), f32(1, 2, 4)
	// A matrix whose 17 batch axes are permuted so that no two merge: a
	// product must copy it, and the copy has too many dims for one layout.
	deep := make([]int, 19)
	perm := make([]int, 19)
	for i := range 17 {
		deep[i], perm[i] = 2, 16-i
	}
	deep[17], deep[18], perm[17], perm[18] = 2, 2, 17, 18
	deepBase := f32(deep...)
	unmergeable := deepBase.Permute(perm...)
	// Views and copies the cases take, made here so that a case's scope
	// holds nothing but what the op under test made.
	xT, x34T, sqT, i32T, x64T := x.T(), x34.T(), sq.T(), i32.T(), x64.T()
	empty, col := x.Narrow(1, 0, 0), x.Narrow(1, 0, 1)
	x32, m22, kb := f32(3, 2), f32(2, 2), f32(3, 8, 4)
	h2 := map[tensor.DType]*tensor.Tensor{tensor.Float16: loss2.To(tensor.Float16), tensor.BFloat16: loss2.To(tensor.BFloat16)}
	inputs := []*tensor.Tensor{x, x64, h16, bf, i32, x4, x34, sq, w3, rel, ids, badIDs, negIDs, table, table64, loss2, q, lse, lse64, deepBase, unmergeable,
		qkv, qkvI32, qkvY, qkvLSE,
		xT, x34T, sqT, i32T, x64T, empty, col, x32, m22, kb, h2[tensor.Float16], h2[tensor.BFloat16]}
	tensor.Keep(inputs...)
	defer func() {
		for _, in := range inputs {
			in.Release()
		}
	}()
	rel.Release()
	halfs := []*tensor.Tensor{h16, bf}

	var cases []badCase
	add := func(name, op string, want error, run func()) {
		cases = append(cases, badCase{name, op, want, run})
	}

	// Element-wise.
	for _, h := range halfs {
		for op := range tensor.NumBinaryOps {
			name := op.String() // Binary names the function that runs op: Maximum, not Max (the reduction)
			if op == tensor.OpMax {
				name = "Maximum"
			}
			add(fmt.Sprintf("%v %v", op, h.DType()), name, tensor.ErrDType, func() { tensor.Binary(op, h, h) })
		}
		for op := range tensor.NumUnaryOps {
			add(fmt.Sprintf("%v %v", op, h.DType()), op.String(), tensor.ErrDType, func() { tensor.Unary(op, h) })
			add(fmt.Sprintf("%vBackward %v", op, h.DType()), op.String()+"Backward", tensor.ErrDType, func() { tensor.UnaryBackward(op, h, h, h) })
			other := tensor.BFloat16 // a half type to the other one: no kernel
			if h.DType() == tensor.BFloat16 {
				other = tensor.Float16
			}
			add(fmt.Sprintf("%v %v to %v", op, h.DType(), other), op.String(), tensor.ErrDType, func() { tensor.UnaryTo(op, h, other) })
			add(fmt.Sprintf("%vBackward %v with a %v gradient", op, h.DType(), other), op.String()+"Backward", tensor.ErrDType,
				func() { tensor.UnaryBackwardTo(op, h, h, x, other) })
		}
		add("Affine "+h.DType().String(), "Affine", tensor.ErrDType, func() { tensor.Affine(h, 2, 1) })
		add("Scale "+h.DType().String(), "Affine", tensor.ErrDType, func() { tensor.Scale(h, 2) })
		add("AddScalar "+h.DType().String(), "Affine", tensor.ErrDType, func() { tensor.AddScalar(h, 2) })
		add("ScaleInPlace "+h.DType().String(), "ScaleInPlace", tensor.ErrDType, func() { h.ScaleInPlace(2) })
		add("AddInPlace "+h.DType().String(), "AddInPlace", tensor.ErrDType, func() { h.AddInPlace(h) })
	}
	add("Add int32", "Add", tensor.ErrDType, func() { tensor.Add(i32, i32) })
	add("Add float32+float64", "Add", tensor.ErrDType, func() { tensor.Add(x, x64) })
	add("Add shapes", "Add", tensor.ErrShape, func() { tensor.Add(x, x4) })
	add("Mul released", "Mul", tensor.ErrReleased, func() { tensor.Mul(x, rel) })
	add("Sub nil", "Sub", tensor.ErrArgument, func() { tensor.Sub(x, nil) })
	add("Binary unknown op", tensor.NumBinaryOps.String(), tensor.ErrArgument, func() { tensor.Binary(tensor.NumBinaryOps, x, x) })
	add("Unary unknown op", tensor.NumUnaryOps.String(), tensor.ErrArgument, func() { tensor.Unary(tensor.NumUnaryOps, x) })
	add("Exp int32", "Exp", tensor.ErrDType, func() { tensor.Exp(i32) })
	add("Gelu released", "Gelu", tensor.ErrReleased, func() { tensor.Gelu(rel) })
	add("UnaryTo float64 to float16", "Gelu", tensor.ErrDType, func() { tensor.UnaryTo(tensor.OpGelu, x64, tensor.Float16) })
	add("UnaryTo nil", "Gelu", tensor.ErrArgument, func() { tensor.UnaryTo(tensor.OpGelu, nil, tensor.Float16) })
	add("UnaryBackward shapes", "TanhBackward", tensor.ErrShape, func() { tensor.UnaryBackward(tensor.OpTanh, nil, x, x34) })
	add("UnaryBackward without y", "TanhBackward", tensor.ErrArgument, func() { tensor.UnaryBackward(tensor.OpTanh, x, nil, x) })
	add("MeanDivisor bfloat16", "MeanDivisor", tensor.ErrDType, func() { tensor.MeanDivisor(ids, -100, tensor.BFloat16) })
	add("MeanDivisor float targets", "MeanDivisor", tensor.ErrDType, func() { tensor.MeanDivisor(x, -100, tensor.Float32) })
	add("UnaryBackwardTo int32", "GeluBackward", tensor.ErrDType, func() { tensor.UnaryBackwardTo(tensor.OpGelu, x, nil, x, tensor.Int32) })
	add("UnaryBackwardTo float64 to bfloat16", "GeluBackward", tensor.ErrDType, func() { tensor.UnaryBackwardTo(tensor.OpGelu, x64, nil, x64, tensor.BFloat16) })
	add("UnaryBackwardTo nil dy", "GeluBackward", tensor.ErrArgument, func() { tensor.UnaryBackwardTo(tensor.OpGelu, x, nil, nil, tensor.BFloat16) })
	add("AddInPlace shapes", "AddInPlace", tensor.ErrShape, func() { x.AddInPlace(x4) })
	add("Fill released", "Fill", tensor.ErrReleased, func() { rel.Fill(1) })

	// Reductions.
	for _, h := range halfs {
		s := h.DType().String()
		add("Sum "+s, "Sum", tensor.ErrDType, func() { tensor.Sum(h, false) })
		add("Sum axes "+s, "Sum", tensor.ErrDType, func() { tensor.Sum(h, true, 0, 1) })
		add("Max "+s, "Max", tensor.ErrDType, func() { tensor.Max(h, false, 1) })
		add("Mean "+s, "Mean", tensor.ErrDType, func() { tensor.Mean(h, false) })
		add("SumTo "+s, "SumTo", tensor.ErrDType, func() { tensor.SumTo(h, []int{3}) })
		add("SumSquares "+s, "SumSquares", tensor.ErrDType, func() { tensor.SumSquares(h) })
	}
	add("Sum int32", "Sum", tensor.ErrDType, func() { tensor.Sum(i32, false) })
	add("Sum axis", "Sum", tensor.ErrShape, func() { tensor.Sum(x, false, 2) })
	add("Sum repeated axis", "Sum", tensor.ErrShape, func() { tensor.Sum(x, false, 1, -1) })
	add("Max empty axis", "Max", tensor.ErrShape, func() { tensor.Max(empty, false, 1) })
	add("Mean released", "Mean", tensor.ErrReleased, func() { tensor.Mean(rel, false) })
	add("SumTo shape", "SumTo", tensor.ErrShape, func() { tensor.SumTo(x, []int{2}) })
	add("SumSquaresAll released", "SumSquaresAll", tensor.ErrReleased, func() { tensor.SumSquaresAll([]*tensor.Tensor{x, rel}) })
	add("SumSquaresAll int32", "SumSquaresAll", tensor.ErrDType, func() { tensor.SumSquaresAll([]*tensor.Tensor{x, i32}) }) // half ones are widened (ops_half_widen.go)
	add("SumSquares int32", "SumSquares", tensor.ErrDType, func() { tensor.SumSquares(i32) })

	// Matrix products.
	add("MatMul int32", "MatMul", tensor.ErrDType, func() { tensor.MatMul(i32, i32T) })
	add("MatMul float32@float64", "MatMul", tensor.ErrDType, func() { tensor.MatMul(x, x64T) })
	add("MatMul inner", "MatMul", tensor.ErrShape, func() { tensor.MatMul(x, x) })
	add("MatMul 1-D", "MatMul", tensor.ErrShape, func() { tensor.MatMul(x4, x4) })
	add("MatMul batch", "MatMul", tensor.ErrShape, func() { tensor.MatMul(q, kb) })
	add("MatMul released", "MatMul", tensor.ErrReleased, func() { tensor.MatMul(rel, x34) })
	add("MatMul unmergeable", "Clone", tensor.ErrShape, func() { tensor.MatMul(unmergeable, m22) })
	add("MatMulScaled shapes", "MatMul", tensor.ErrShape, func() { tensor.MatMulScaled(x, x, 2) })
	add("MatMulWith half@float32", "MatMul", tensor.ErrDType, func() { tensor.MatMulWith(h16, x34, 1, tensor.MatMulMode{Float32Out: true}) })
	add("MatMulBias bias shape", "MatMulBias", tensor.ErrShape, func() { tensor.MatMulBias(x, x34, w3, tensor.MatMulMode{}) })
	add("MatMulBias released bias", "MatMulBias", tensor.ErrReleased, func() { tensor.MatMulBias(x, x34, rel, tensor.MatMulMode{}) })
	add("MatMulBias int32", "MatMulBias", tensor.ErrDType, func() { tensor.MatMulBias(i32, i32T, ids, tensor.MatMulMode{}) })
	add("MatMulBias inner", "MatMulBias", tensor.ErrShape, func() { tensor.MatMulBias(x, x, w3, tensor.MatMulMode{}) })
	add("MatMulRowSums inner", "MatMulRowSums", tensor.ErrShape, func() { tensor.MatMulRowSums(x, x, tensor.MatMulMode{}) })
	add("MatMulRowSums int32", "MatMulRowSums", tensor.ErrDType, func() { tensor.MatMulRowSums(i32, i32T, tensor.MatMulMode{}) })
	add("MatMulRowSums nil", "MatMulRowSums", tensor.ErrArgument, func() { tensor.MatMulRowSums(x, nil, tensor.MatMulMode{}) })

	// Softmax and masks.
	for _, h := range halfs {
		s := h.DType().String()
		add("Softmax "+s, "Softmax", tensor.ErrDType, func() { tensor.Softmax(h) })
		add("LogSoftmax "+s, "LogSoftmax", tensor.ErrDType, func() { tensor.LogSoftmax(h) })
		add("SoftmaxBackward "+s, "SoftmaxBackward", tensor.ErrDType, func() { tensor.SoftmaxBackward(h, h, false) })
		add("CausalSoftmax "+s, "CausalSoftmax", tensor.ErrDType, func() { tensor.CausalSoftmax(h) })
		add("CausalSoftmaxBackward "+s, "CausalSoftmaxBackward", tensor.ErrDType, func() { tensor.CausalSoftmaxBackward(h, h) })
		add("CausalMask "+s, "CausalMask", tensor.ErrDType, func() { tensor.CausalMask(h, tensor.NegInf) })
		add("CausalMaskInPlace "+s, "CausalMaskInPlace", tensor.ErrDType, func() { h.CausalMaskInPlace(0) })
	}
	add("Softmax released", "Softmax", tensor.ErrReleased, func() { tensor.Softmax(rel) })
	add("Softmax int32", "Softmax", tensor.ErrDType, func() { tensor.Softmax(i32) })
	add("SoftmaxBackward shapes", "SoftmaxBackward", tensor.ErrShape, func() { tensor.SoftmaxBackward(x, x34, true) })
	add("CausalSoftmax 1-D", "CausalSoftmax", tensor.ErrShape, func() { tensor.CausalSoftmax(x4) })
	add("CausalSoftmax rows > cols", "CausalSoftmax", tensor.ErrShape, func() { tensor.CausalSoftmax(xT) })
	add("CausalSoftmaxBackward nil", "CausalSoftmaxBackward", tensor.ErrArgument, func() { tensor.CausalSoftmaxBackward(nil, x) })
	add("CausalSoftmaxBackward shapes", "CausalSoftmaxBackward", tensor.ErrShape, func() { tensor.CausalSoftmaxBackward(x, x34) })
	add("CausalMask 1-D", "CausalMask", tensor.ErrShape, func() { tensor.CausalMask(x4, 0) })
	add("CausalMaskInPlace strided", "CausalMaskInPlace", tensor.ErrShape, func() { x34T.CausalMaskInPlace(0) })

	// Layer norm.
	for _, h := range halfs {
		s := h.DType().String()
		add("LayerNorm "+s, "LayerNorm", tensor.ErrDType, func() { tensor.LayerNorm(h, nil, nil, 1e-5) })
		add("LayerNormBackward "+s, "LayerNormBackward", tensor.ErrDType, func() { tensor.LayerNormBackward(h, h, h2[h.DType()], h2[h.DType()], nil, false) })
	}
	add("LayerNorm nil", "LayerNorm", tensor.ErrArgument, func() { tensor.LayerNorm(nil, nil, nil, 1e-5) })
	add("LayerNormTo int32", "LayerNorm", tensor.ErrDType, func() { tensor.LayerNormTo(x, nil, nil, 1e-5, tensor.Int32) })
	add("LayerNormTo float64 to bfloat16", "LayerNorm", tensor.ErrDType, func() { tensor.LayerNormTo(x64, nil, nil, 1e-5, tensor.BFloat16) })
	add("LayerNormTo nil", "LayerNorm", tensor.ErrArgument, func() { tensor.LayerNormTo(nil, nil, nil, 1e-5, tensor.BFloat16) })
	add("LayerNorm released", "LayerNorm", tensor.ErrReleased, func() { tensor.LayerNorm(rel, w3, w3, 1e-5) })
	add("LayerNorm weight", "LayerNorm", tensor.ErrShape, func() { tensor.LayerNorm(x, x4, nil, 1e-5) })
	add("LayerNorm weight dtype", "LayerNorm", tensor.ErrDType, func() { tensor.LayerNorm(x64, w3, nil, 1e-5) })
	add("LayerNorm no columns, weight of 3", "LayerNorm", tensor.ErrShape, func() { tensor.LayerNorm(empty, w3, nil, 1e-5) })
	add("LayerNormBackward mean", "LayerNormBackward", tensor.ErrShape, func() { tensor.LayerNormBackward(x, x, w3, loss2, w3, true) })
	add("LayerNormBackward weight", "LayerNormBackward", tensor.ErrShape, func() { tensor.LayerNormBackward(x, x, loss2, loss2, x4, true) })
	add("LayerNormBackward nil x", "LayerNormBackward", tensor.ErrArgument, func() { tensor.LayerNormBackward(x, nil, loss2, loss2, nil, false) })

	// Embedding (gather and scatter-add).
	add("Embedding id out of range", "Embedding", tensor.ErrArgument, func() { tensor.Embedding(table, badIDs) })
	add("Embedding negative id", "Embedding", tensor.ErrArgument, func() { tensor.Embedding(table, negIDs) })
	add("Embedding float ids", "Embedding", tensor.ErrDType, func() { tensor.Embedding(table, x) })
	add("Embedding 1-D table", "Embedding", tensor.ErrShape, func() { tensor.Embedding(x4, ids) })
	add("Embedding released", "Embedding", tensor.ErrReleased, func() { tensor.Embedding(rel, ids) })
	for _, h := range halfs {
		add("EmbeddingBackward "+h.DType().String(), "EmbeddingBackward", tensor.ErrDType, func() { tensor.EmbeddingBackward(ids, h, 4) })
	}
	add("EmbeddingBackward id out of range", "EmbeddingBackward", tensor.ErrArgument, func() { tensor.EmbeddingBackward(badIDs, x, 4) })
	add("EmbeddingBackward negative id", "EmbeddingBackward", tensor.ErrArgument, func() { tensor.EmbeddingBackward(negIDs, x, 4) })
	add("EmbeddingBackward negative rows", "EmbeddingBackward", tensor.ErrShape, func() { tensor.EmbeddingBackward(ids, x, -1) })
	add("EmbeddingBackward shapes", "EmbeddingBackward", tensor.ErrShape, func() { tensor.EmbeddingBackward(ids, x34, 4) })
	add("EmbeddingBackward int32", "EmbeddingBackward", tensor.ErrDType, func() { tensor.EmbeddingBackward(ids, i32, 4) })
	add("EmbeddingBackwardInto id out of range", "EmbeddingBackwardInto", tensor.ErrArgument, func() { tensor.EmbeddingBackwardInto(table, badIDs, x) })
	add("EmbeddingBackwardInto columns", "EmbeddingBackwardInto", tensor.ErrShape, func() { tensor.EmbeddingBackwardInto(x34, ids, x) })
	add("EmbeddingBackwardInto strided table", "EmbeddingBackwardInto", tensor.ErrShape, func() { tensor.EmbeddingBackwardInto(x34T, ids, x) })
	add("EmbeddingBackwardInto dtype", "EmbeddingBackwardInto", tensor.ErrDType, func() { tensor.EmbeddingBackwardInto(table64, ids, x) })
	add("EmbeddingBackwardInto released", "EmbeddingBackwardInto", tensor.ErrReleased, func() { tensor.EmbeddingBackwardInto(rel, ids, x) })

	// Cross-entropy.
	for _, h := range halfs {
		s := h.DType().String()
		add("CrossEntropy "+s, "CrossEntropy", tensor.ErrDType, func() { tensor.CrossEntropy(h, ids, -100) })
		add("CrossEntropyPadded "+s, "CrossEntropyPadded", tensor.ErrDType, func() { tensor.CrossEntropyPadded(h, 2, ids, -100) })
		add("CrossEntropyBackward "+s, "CrossEntropyBackward", tensor.ErrDType, func() { tensor.CrossEntropyBackward(h, ids, h2[h.DType()], -100) })
		add("CrossEntropyFused "+s, "CrossEntropyFused", tensor.ErrDType, func() { tensor.CrossEntropyFused(h, -1, ids, h2[h.DType()], -100, h.DType()) })
	}
	add("CrossEntropy target out of range", "CrossEntropy", tensor.ErrArgument, func() { tensor.CrossEntropy(x, badIDs, -100) })
	add("CrossEntropy negative target", "CrossEntropy", tensor.ErrArgument, func() { tensor.CrossEntropy(x, negIDs, -100) })
	add("CrossEntropy float targets", "CrossEntropy", tensor.ErrDType, func() { tensor.CrossEntropy(x, loss2, -100) })
	add("CrossEntropy 1-D logits", "CrossEntropy", tensor.ErrShape, func() { tensor.CrossEntropy(x4, ids, -100) })
	add("CrossEntropy targets count", "CrossEntropy", tensor.ErrShape, func() { tensor.CrossEntropy(x34, ids, -100) })
	add("CrossEntropyPadded classes", "CrossEntropyPadded", tensor.ErrShape, func() { tensor.CrossEntropyPadded(x, 4, ids, -100) })
	add("CrossEntropyPadded no classes", "CrossEntropyPadded", tensor.ErrShape, func() { tensor.CrossEntropyPadded(x, 0, ids, -100) })
	add("CrossEntropyPadded target in padding", "CrossEntropyPadded", tensor.ErrArgument, func() {
		tg := tensor.FromInt32s(dev, []int32{0, 2}, 2)
		defer tg.Release()
		tensor.CrossEntropyPadded(x, 2, tg, -100)
	})
	add("CrossEntropyBackward target", "CrossEntropyBackward", tensor.ErrArgument, func() { tensor.CrossEntropyBackward(x, badIDs, loss2, -100) })
	add("CrossEntropyBackward dloss", "CrossEntropyBackward", tensor.ErrShape, func() { tensor.CrossEntropyBackward(x, ids, x4, -100) })
	add("CrossEntropyBackward released", "CrossEntropyBackward", tensor.ErrReleased, func() { tensor.CrossEntropyBackward(rel, ids, loss2, -100) })
	// A target out of range is found by the backward primitive, which both
	// devices name (CUDA at the next synchronization).
	add("CrossEntropyPaddedBackward target", "CrossEntropyBackward", tensor.ErrArgument, func() { tensor.CrossEntropyPaddedBackward(x, 2, badIDs, loss2, -100) })
	add("CrossEntropyPaddedBackward classes", "CrossEntropyPaddedBackward", tensor.ErrShape, func() { tensor.CrossEntropyPaddedBackward(x, 5, ids, loss2, -100) })
	add("CrossEntropyFused target", "CrossEntropyFused", tensor.ErrArgument, func() { tensor.CrossEntropyFused(x, -1, badIDs, loss2, -100, tensor.Float16) })
	add("CrossEntropyFused grad dtype", "CrossEntropyFused", tensor.ErrDType, func() { tensor.CrossEntropyFused(x, -1, ids, loss2, -100, tensor.Int32) })
	add("CrossEntropyFused half grad of float64", "CrossEntropyFused", tensor.ErrDType, func() {
		d := loss2.To(tensor.Float64)
		defer d.Release()
		tensor.CrossEntropyFused(x64, -1, ids, d, -100, tensor.Float16)
	})
	add("CountTargets nil", "CountTargets", tensor.ErrArgument, func() { tensor.CountTargets(nil, -100) })
	add("CountTargets released", "CountTargets", tensor.ErrReleased, func() {
		tg := tensor.FromInt32s(dev, []int32{0, 2}, 2)
		tg.Release()
		tensor.CountTargets(tg, -100)
	})
	add("CountTargets float", "CountTargets", tensor.ErrDType, func() { tensor.CountTargets(loss2, -100) })

	// Dropout.
	for _, h := range halfs {
		add("Dropout "+h.DType().String(), "Dropout", tensor.ErrDType, func() { tensor.Dropout(h, 0.5, 1, 0) })
	}
	add("Dropout p=1", "Dropout", tensor.ErrArgument, func() { tensor.Dropout(x, 1, 1, 0) })
	add("Dropout p<0", "Dropout", tensor.ErrArgument, func() { tensor.Dropout(x, -0.1, 1, 0) })
	add("Dropout NaN", "Dropout", tensor.ErrArgument, func() { tensor.Dropout(x, math.NaN(), 1, 0) })
	add("Dropout released", "Dropout", tensor.ErrReleased, func() { tensor.Dropout(rel, 0.5, 1, 0) })
	add("Dropout int32", "Dropout", tensor.ErrDType, func() { tensor.Dropout(i32, 0.5, 1, 0) })

	// Optimizers (in place: nothing is allocated, nothing may change).
	for _, h := range halfs {
		s := h.DType().String()
		add("AdamWStep "+s, "AdamW", tensor.ErrDType, func() { tensor.AdamWStep(h, h, h, h, 1e-3, 0.9, 0.999, 1e-8, 0, 1) })
		add("SGDStep "+s, "SGD", tensor.ErrDType, func() { tensor.SGDStep(h, h, nil, 1e-3, 0, 0, false) })
	}
	add("AdamWStep shapes", "AdamW", tensor.ErrShape, func() { tensor.AdamWStep(x, x, x, x34, 1e-3, 0.9, 0.999, 1e-8, 0, 1) })
	add("AdamWStep strided buffer", "AdamW", tensor.ErrShape, func() { tensor.AdamWStep(sq, sq, sq, sqT, 1e-3, 0.9, 0.999, 1e-8, 0, 1) })
	add("AdamWStep step 0", "AdamW", tensor.ErrArgument, func() { tensor.AdamWStep(x, x, x, x, 1e-3, 0.9, 0.999, 1e-8, 0, 0) })
	add("AdamWStep released", "AdamW", tensor.ErrReleased, func() { tensor.AdamWStep(x, x, rel, x, 1e-3, 0.9, 0.999, 1e-8, 0, 1) })
	add("AdamWSteps lengths", "AdamW", tensor.ErrArgument, func() {
		tensor.AdamWSteps([]*tensor.Tensor{x}, nil, nil, nil, nil, 1e-3, 0.9, 0.999, 1e-8, 1)
	})
	add("AdamWSteps nil", "AdamW", tensor.ErrArgument, func() {
		ts := []*tensor.Tensor{nil}
		tensor.AdamWSteps(ts, ts, ts, ts, []float64{0}, 1e-3, 0.9, 0.999, 1e-8, 1)
	})
	add("SGDStep shapes", "SGD", tensor.ErrShape, func() { tensor.SGDStep(x, x34, nil, 1e-3, 0, 0, false) })
	add("SGDStep momentum without buffer", "SGD", tensor.ErrArgument, func() { tensor.SGDStep(x, x, nil, 1e-3, 0.9, 0, false) })
	add("SGDStep nesterov without momentum", "SGD", tensor.ErrArgument, func() { tensor.SGDStep(x, x, x, 1e-3, 0, 0, true) })

	// Fused attention.
	add("FusedCausalAttention int32", "FusedCausalAttention", tensor.ErrDType, func() { tensor.FusedCausalAttention(i32, i32, i32, 0, 1, 0) })
	add("FusedCausalAttention shapes", "FusedCausalAttention", tensor.ErrShape, func() { tensor.FusedCausalAttention(q, q, x, 0, 1, 0) })
	add("FusedCausalAttention 1-D", "FusedCausalAttention", tensor.ErrShape, func() { tensor.FusedCausalAttention(x4, x4, x4, 0, 1, 0) })
	add("FusedCausalAttention p=1", "FusedCausalAttention", tensor.ErrArgument, func() { tensor.FusedCausalAttention(q, q, q, 1, 1, 0) })
	add("FusedCausalAttention released", "FusedCausalAttention", tensor.ErrReleased, func() { tensor.FusedCausalAttention(q, q, rel, 0, 1, 0) })
	add("FusedCausalAttentionQKV int32", "FusedCausalAttentionQKV", tensor.ErrDType, func() { tensor.FusedCausalAttentionQKV(qkvI32, 2, 0, 1, 0) })
	add("FusedCausalAttentionQKV heads", "FusedCausalAttentionQKV", tensor.ErrShape, func() { tensor.FusedCausalAttentionQKV(qkv, 5, 0, 1, 0) })
	add("FusedCausalAttentionQKV p=1", "FusedCausalAttentionQKV", tensor.ErrArgument, func() { tensor.FusedCausalAttentionQKV(qkv, 2, 1, 1, 0) })
	add("FusedCausalAttentionQKV released", "FusedCausalAttentionQKV", tensor.ErrReleased, func() { tensor.FusedCausalAttentionQKV(rel, 2, 0, 1, 0) })
	add("FusedCausalAttentionQKV nil", "FusedCausalAttentionQKV", tensor.ErrArgument, func() { tensor.FusedCausalAttentionQKV(nil, 2, 0, 1, 0) })
	add("FusedCausalAttentionQKVBackward released", "FusedCausalAttentionQKVBackward", tensor.ErrReleased, func() {
		tensor.FusedCausalAttentionQKVBackward(qkv, qkvY, qkvLSE, rel, 2, 0, 1, 0)
	})
	add("FusedCausalAttentionQKVBackward nil", "FusedCausalAttentionQKVBackward", tensor.ErrArgument, func() {
		tensor.FusedCausalAttentionQKVBackward(qkv, nil, qkvLSE, qkvY, 2, 0, 1, 0)
	})
	add("FusedCausalAttentionQKVBackward dy shape", "FusedCausalAttentionQKVBackward", tensor.ErrShape, func() {
		tensor.FusedCausalAttentionQKVBackward(qkv, qkvY, qkvLSE, qkvLSE, 2, 0, 1, 0)
	})
	add("FusedCausalAttentionQKVBackward dy dtype", "FusedCausalAttentionQKVBackward", tensor.ErrDType, func() {
		dy64 := qkvY.To(tensor.Float64)
		defer dy64.Release()
		tensor.FusedCausalAttentionQKVBackward(qkv, qkvY, qkvLSE, dy64, 2, 0, 1, 0)
	})
	add("FusedCausalAttentionQKVBackward lse dtype", "FusedCausalAttentionQKVBackward", tensor.ErrDType, func() {
		lse64 := qkvLSE.To(tensor.Float64)
		defer lse64.Release()
		tensor.FusedCausalAttentionQKVBackward(qkv, qkvY, lse64, qkvY, 2, 0, 1, 0)
	})
	// A dtype other than the accumulation dtype is ErrDType (it was
	// ErrShape, whatever the operand's shape), a wrong shape ErrShape.
	add("FusedCausalAttentionBackward out dtype", "FusedCausalAttentionBackward", tensor.ErrDType, func() {
		q64 := q.To(tensor.Float64)
		defer q64.Release()
		tensor.FusedCausalAttentionBackward(q, q, q, q64, lse, q, 0, 1, 0)
	})
	add("FusedCausalAttentionBackward dout shape", "FusedCausalAttentionBackward", tensor.ErrShape, func() { tensor.FusedCausalAttentionBackward(q, q, q, q, lse, lse, 0, 1, 0) })
	add("FusedCausalAttentionBackward lse dtype", "FusedCausalAttentionBackward", tensor.ErrDType, func() { tensor.FusedCausalAttentionBackward(q, q, q, q, lse64, q, 0, 1, 0) })
	add("FusedCausalAttentionBackward lse shape", "FusedCausalAttentionBackward", tensor.ErrShape, func() { tensor.FusedCausalAttentionBackward(q, q, q, q, q, q, 0, 1, 0) })
	add("FusedCausalAttentionBackward released", "FusedCausalAttentionBackward", tensor.ErrReleased, func() { tensor.FusedCausalAttentionBackward(q, q, q, q, lse, rel, 0, 1, 0) })
	add("FusedCausalAttentionBackward nil", "FusedCausalAttentionBackward", tensor.ErrArgument, func() { tensor.FusedCausalAttentionBackward(q, q, q, nil, lse, q, 0, 1, 0) })

	// Gradient unscaling.
	add("UnscaleGrads float64", "UnscaleGrads", tensor.ErrDType, func() { tensor.UnscaleGrads([]*tensor.Tensor{x, x64}, 0.5) })
	add("UnscaleGrads strided", "UnscaleGrads", tensor.ErrDType, func() { tensor.UnscaleGrads([]*tensor.Tensor{x34T}, 0.5) })
	add("UnscaleGrads released", "UnscaleGrads", tensor.ErrReleased, func() { tensor.UnscaleGrads([]*tensor.Tensor{rel}, 0.5) })

	// Views, copies and casts.
	add("Reshape count", "Reshape", tensor.ErrShape, func() { x.Reshape(4, 2) })
	add("Reshape two -1", "Reshape", tensor.ErrShape, func() { x.Reshape(-1, -1) })
	add("Reshape negative", "Reshape", tensor.ErrShape, func() { x.Reshape(-2, -3) })
	add("Reshape overflow", "Reshape", tensor.ErrShape, func() { x34.Reshape(1<<62+1, 12) })
	add("Reshape released", "Reshape", tensor.ErrReleased, func() { rel.Reshape(6) })
	add("Transpose axis", "Transpose", tensor.ErrShape, func() { x.Transpose(0, 2) })
	add("Permute length", "Permute", tensor.ErrShape, func() { x.Permute(0) })
	add("Permute repeated", "Permute", tensor.ErrShape, func() { x.Permute(1, 1) })
	add("Narrow range", "Narrow", tensor.ErrShape, func() { x.Narrow(1, 2, 2) })
	add("Narrow negative", "Narrow", tensor.ErrShape, func() { x.Narrow(1, -1, 1) })
	add("Narrow overflow", "Narrow", tensor.ErrShape, func() { x.Narrow(1, math.MaxInt, 1) })
	add("Split size", "Split", tensor.ErrArgument, func() { x.Split(0, 1) })
	add("Split axis", "Split", tensor.ErrShape, func() { x.Split(1, 3) })
	add("Expand", "Expand", tensor.ErrShape, func() { x.Expand(3, 3) })
	add("Expand negative", "Expand", tensor.ErrShape, func() { col.Expand(2, -3) })
	add("Unsqueeze axis", "Unsqueeze", tensor.ErrShape, func() { x.Unsqueeze(4) })
	add("Squeeze not 1", "Squeeze", tensor.ErrShape, func() { x.Squeeze(0) })
	add("Concat dtypes", "Concat", tensor.ErrDType, func() { tensor.Concat(0, x, x64) })
	add("Concat shapes", "Concat", tensor.ErrShape, func() { tensor.Concat(0, x, x34) })
	add("Concat none", "Concat", tensor.ErrArgument, func() { tensor.Concat(0) })
	add("Concat released", "Concat", tensor.ErrReleased, func() { tensor.Concat(0, x, rel) })
	add("WriteNarrow range", "WriteNarrow", tensor.ErrShape, func() { x34.WriteNarrow(1, 3, x32) })
	add("WriteNarrow overflow", "WriteNarrow", tensor.ErrShape, func() { x34.WriteNarrow(1, math.MaxInt, x32) })
	add("WriteNarrow negative", "WriteNarrow", tensor.ErrShape, func() { x34.WriteNarrow(1, -1, x32) })
	add("WriteNarrow dtype", "WriteNarrow", tensor.ErrDType, func() { x.WriteNarrow(0, 0, x64) })
	add("CopyFrom shapes", "CopyFrom", tensor.ErrShape, func() { x.CopyFrom(x34) })
	add("CopyFrom released", "CopyFrom", tensor.ErrReleased, func() { x.CopyFrom(rel) })
	add("CopyFrom strided destination", "CopyFrom", tensor.ErrArgument, func() { sqT.CopyFrom(sq) })
	add("To unknown dtype", "To", tensor.ErrDType, func() { x.To(tensor.DType(99)) })
	add("To released", "To", tensor.ErrReleased, func() { rel.To(tensor.Float64) })
	add("ToDevice nil", "ToDevice", tensor.ErrDevice, func() { x34T.ToDevice(nil) })
	add("Clone released", "Clone", tensor.ErrReleased, func() { rel.Clone() })
	add("Contiguous released", "Contiguous", tensor.ErrReleased, func() { rel.Contiguous() })
	add("Float32s released", "Float32s", tensor.ErrReleased, func() { rel.Float32s() })
	add("Item shape", "Item", tensor.ErrShape, func() { x.Item() })
	add("Dim axis", "Dim", tensor.ErrShape, func() { x.Dim(2) })

	// Creation.
	add("Empty negative", "Empty", tensor.ErrShape, func() { tensor.Empty(dev, tensor.Float32, 2, -1) })
	add("Empty nil device", "Empty", tensor.ErrDevice, func() { tensor.Empty(nil, tensor.Float32, 2) })
	add("Empty unknown dtype", "Empty", tensor.ErrDType, func() { tensor.Empty(dev, tensor.DType(99), 2) })
	add("Zeros negative", "Full", tensor.ErrShape, func() { tensor.Zeros(dev, tensor.Float32, -2, -3) })
	add("FromFloat32s count", "FromFloat32s", tensor.ErrShape, func() { tensor.FromFloat32s(dev, []float32{1, 2}, 3) })
	add("FromFloat64s negative", "FromFloat64s", tensor.ErrShape, func() { tensor.FromFloat64s(dev, []float64{1, 2}, -1, -2) })
	add("FromFloats unknown dtype", "To", tensor.ErrDType, func() { tensor.FromFloats(dev, tensor.DType(99), []float64{1, 2}) })
	add("Arange negative", "Arange", tensor.ErrShape, func() { tensor.Arange(dev, tensor.Int32, 0, -1) })
	add("Arange negative float", "Arange", tensor.ErrShape, func() { tensor.Arange(dev, tensor.Float32, 0, -1) })
	add("RandN negative", "RandN", tensor.ErrShape, func() { tensor.RandN(dev, tensor.Float32, rand.New(rand.NewPCG(1, 2)), 1, 2, -1) })
	add("RandN nil rng", "RandN", tensor.ErrArgument, func() { tensor.RandN(dev, tensor.Float32, nil, 1, 2) })
	add("RandUniform negative", "RandUniform", tensor.ErrShape, func() { tensor.RandUniform(dev, tensor.Float32, rand.New(rand.NewPCG(1, 2)), 0, 1, -3) })
	add("ZerosLike released", "ZerosLike", tensor.ErrReleased, func() { tensor.ZerosLike(rel) })
	add("ZerosLike nil", "ZerosLike", tensor.ErrArgument, func() { tensor.ZerosLike(nil) })

	mem := dev.Memory()
	memtest.Settled(mem)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := tensor.NewScope()
			defer s.Close()
			before := mem.InUse()
			raw, err := tryOp(c.run)
			if raw != nil {
				t.Fatalf("panicked with %T %v, not an *OpError", raw, raw)
			}
			var oe *tensor.OpError
			switch {
			case err == nil:
				t.Errorf("no error, want %v", c.want)
			case !errors.As(err, &oe):
				t.Errorf("error %T %v is not an *OpError", err, err)
			case oe.Op != c.op:
				t.Errorf("error %q names op %q, want %q", err, oe.Op, c.op)
			case !errors.Is(err, c.want):
				t.Errorf("error %q does not wrap %q", err, c.want)
			}
			if n := s.Len(); n != 0 {
				t.Errorf("%d tensors left in the scope (outputs or temporaries not released)", n)
			}
			if after := mem.InUse(); after != before {
				t.Errorf("%d bytes in use after the failure, %d before", after, before)
			}
		})
	}
}

// tryOp is tensor.Try, with any other panic returned (raw) instead of
// passed on, so that one bad op fails its case only.
func tryOp(fn func()) (raw any, err error) {
	defer func() {
		if r := recover(); r != nil {
			raw = r
		}
	}()
	return nil, tensor.Try(fn)
}

// A failing AdamWSteps changes no parameter, also when the bad one comes
// after good ones of another dtype (the groups run one after the other).
func TestAdamWStepsChecksEveryDTypeFirst(t *testing.T) {
	tensor.WithScope(func() {
		p := tensor.FromFloat32s(cpu, []float32{1, 2}, 2)
		g := tensor.FromFloat32s(cpu, []float32{1, 1}, 2)
		m, v := tensor.ZerosLike(p), tensor.ZerosLike(p)
		h := p.To(tensor.Float16)
		ps, gs, ms, vs := []*tensor.Tensor{p, h}, []*tensor.Tensor{g, h}, []*tensor.Tensor{m, h}, []*tensor.Tensor{v, h}
		err := tensor.Try(func() { tensor.AdamWSteps(ps, gs, ms, vs, []float64{0, 0}, 0.1, 0.9, 0.999, 1e-8, 1) })
		if !errors.Is(err, tensor.ErrDType) {
			t.Fatalf("error %v, want ErrDType", err)
		}
		if got := p.Float32s(); got[0] != 1 || got[1] != 2 {
			t.Errorf("the float32 parameter changed to %v before the float16 one failed", got)
		}
	})
}
