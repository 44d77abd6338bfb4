package tensor_test

import (
	"testing"

	"github.com/strata-ml/strata/tensor"
)

// testOpsNN: softmax (warp rows, block rows, vocabulary-sized rows of
// 50257), the causal softmax (square and rectangular), layer norm, embedding with repeated ids, cross-entropy with an
// ignore index, and the optimizers.
func testOpsNN(t *testing.T) {
	softmaxCase := func(name string, rows, cols int, scale float64) opCase {
		return opCase{name: name, tol: 1e-5, run: func(e *env) []*tensor.Tensor {
			x := tensor.Scale(e.randn(rows, cols), scale)
			dy := e.randn(rows, cols)
			y, ly := tensor.Softmax(x), tensor.LogSoftmax(x)
			return []*tensor.Tensor{y, ly, tensor.SoftmaxBackward(y, dy, false), tensor.SoftmaxBackward(ly, dy, true)}
		}}
	}
	causalCase := func(name string, batch, rows, cols int) opCase {
		return opCase{name: name, tol: 1e-5, run: func(e *env) []*tensor.Tensor {
			x := tensor.Scale(e.randn(batch, rows, cols), 3)
			dy := e.randn(batch, rows, cols)
			y := tensor.CausalSoftmax(x)
			return []*tensor.Tensor{y, tensor.CausalSoftmaxBackward(y, dy), tensor.CausalSoftmax(x.T().T())}
		}}
	}
	runSuite(t, []opCase{
		causalCase("CausalSoftmax/square", 6, 37, 37),
		causalCase("CausalSoftmax/rect", 2, 5, 300),
		causalCase("CausalSoftmax/block", 2, 3, 1500),
		softmaxCase("Softmax/short", 6, 37, 2),
		softmaxCase("Softmax/warp-limit", 5, 1024, 3),
		softmaxCase("Softmax/block", 3, 1025, 3),
		softmaxCase("Softmax/vocab", 3, 50257, 3),
		{name: "LayerNorm/affine", tol: 2e-5, run: func(e *env) []*tensor.Tensor {
			x := tensor.AddScalar(tensor.Scale(e.randn(6, 768), 2), 1)
			w, b, dy := e.randn(768), e.randn(768), e.randn(6, 768)
			y, mean, rstd := tensor.LayerNorm(x, w, b, 1e-5)
			dx, dw, db := tensor.LayerNormBackward(dy, x, mean, rstd, w, true)
			return []*tensor.Tensor{y, mean, rstd, dx, dw, db}
		}},
		{name: "LayerNorm/plain", tol: 2e-5, run: func(e *env) []*tensor.Tensor {
			x, dy := e.randn(5, 37), e.randn(5, 37)
			y, mean, rstd := tensor.LayerNorm(x, nil, nil, 1e-5)
			dx, _, _ := tensor.LayerNormBackward(dy, x, mean, rstd, nil, false)
			return []*tensor.Tensor{y, mean, rstd, dx}
		}},
		{name: "LayerNorm/many-rows", tol: 2e-5, run: func(e *env) []*tensor.Tensor {
			x, w, dy := e.randn(300, 64), e.randn(64), e.randn(300, 64)
			y, mean, rstd := tensor.LayerNorm(x, w, nil, 1e-5)
			dx, dw, _ := tensor.LayerNormBackward(dy, x, mean, rstd, w, false)
			return []*tensor.Tensor{y, dx, dw}
		}},
		{name: "Embedding", tol: 1e-5, run: func(e *env) []*tensor.Tensor {
			table := e.randn(10, 7)
			ids := tensor.FromInt32s(e.dev, []int32{1, 0, 3, 1, 9, 3, 3, 1, 5, 0, 0, 2}, 3, 4)
			dout := e.randn(3, 4, 7)
			many := e.ids(50, 2000)
			return []*tensor.Tensor{
				tensor.Embedding(table, ids), tensor.EmbeddingBackward(ids, dout, 10),
				tensor.EmbeddingBackward(many, e.randn(2000, 3), 50),
				tensor.Embedding(tensor.Full(e.dev, tensor.Float16, 0.5, 4, 3), tensor.FromInt32s(e.dev, []int32{3, 0}, 2)),
			}
		}},
		// The GPU's scatter-add sums in position order like the CPU: equal
		// bit for bit, whether the key sort stays in one tile (1,000 ids)
		// or crosses tiles (20,000 ids: 32,768 keys, global steps).
		{name: "EmbeddingBackward/deterministic", exact: true, tol: 1e-4, run: func(e *env) []*tensor.Tensor {
			few, many := e.ids(7, 1000), e.ids(50, 20000)
			return []*tensor.Tensor{
				tensor.EmbeddingBackward(few, e.randn(1000, 33), 7),
				tensor.EmbeddingBackward(many, e.randn(20000, 5), 50),
				embeddingInto(e.randn(50, 5), many, e.randn(20000, 5)),
			}
		}},
		ceCase("CrossEntropy/small", 6, 11),
		ceCase("CrossEntropy/vocab", 4, 50257),
		cePaddedCase("CrossEntropyPadded/small", 6, 11, 16),
		cePaddedCase("CrossEntropyPadded/vocab", 4, 50257, 50304),
		ceFusedCase("CrossEntropyFused/small", 6, 11, 16),
		ceFusedCase("CrossEntropyFused/unpadded", 9, 13, 13),
		ceFusedCase("CrossEntropyFused/vocab", 5, 50257, 50304),
		ceFusedCase("CrossEntropyFused/vocab-unaligned", 3, 50257, 50257),
		{name: "AdamW", tol: 1e-5, run: func(e *env) []*tensor.Tensor {
			p := e.randn(1000)
			m, v := tensor.Zeros(e.dev, e.dt, 1000), tensor.Zeros(e.dev, e.dt, 1000)
			for step := 1; step <= 3; step++ {
				tensor.AdamWStep(p, tensor.Scale(e.randn(1000), 0.1), m, v, 1e-2, 0.9, 0.95, 1e-8, 0.1, step)
			}
			return []*tensor.Tensor{p, m, v}
		}},
		{name: "AdamWSteps", tol: 1e-5, run: func(e *env) []*tensor.Tensor {
			// Many parameters at once (one over a block's chunk of
			// 65,536, one empty) equal one AdamWStep each, to the bit.
			sizes, wds := []int{70001, 3, 0, 1000}, []float64{0.1, 0, 0.1, 0.3}
			var ps, gs, ms, vs, out []*tensor.Tensor
			for _, n := range sizes {
				p := e.randn(n)
				ps, gs = append(ps, p), append(gs, tensor.Scale(e.randn(n), 0.1))
				ms, vs = append(ms, tensor.Zeros(e.dev, e.dt, n)), append(vs, tensor.Zeros(e.dev, e.dt, n))
			}
			clone := func(ts []*tensor.Tensor) (c []*tensor.Tensor) {
				for _, t := range ts {
					c = append(c, t.Clone())
				}
				return c
			}
			p1, m1, v1 := clone(ps), clone(ms), clone(vs)
			for step := 1; step <= 3; step++ {
				tensor.AdamWSteps(ps, gs, ms, vs, wds, 1e-2, 0.9, 0.95, 1e-8, step)
				for i := range p1 {
					tensor.AdamWStep(p1[i], gs[i], m1[i], v1[i], 1e-2, 0.9, 0.95, 1e-8, wds[i], step)
				}
			}
			for i := range ps {
				d := tensor.Sub(ps[i], p1[i])
				out = append(out, ps[i], ms[i], vs[i], tensor.Mul(d, d))
			}
			return out
		}},
		{name: "SGD", tol: 1e-5, run: func(e *env) []*tensor.Tensor {
			p, q, r := e.randn(500), e.randn(500), e.randn(500)
			buf, buf2 := tensor.Zeros(e.dev, e.dt, 500), tensor.Zeros(e.dev, e.dt, 500)
			for range 3 {
				g := e.randn(500)
				tensor.SGDStep(p, g, buf, 0.1, 0.9, 0.01, true)
				tensor.SGDStep(q, g, buf2, 0.1, 0.8, 0, false)
				tensor.SGDStep(r, g, nil, 0.05, 0, 0.02, false)
			}
			return []*tensor.Tensor{p, buf, q, buf2, r}
		}},
	})
}

// ceCase: cross-entropy forward (with the count of counted rows) and
// backward, some targets being the ignore index.
func ceCase(name string, rows, cols int) opCase {
	return opCase{name: name, tol: 1e-5, run: func(e *env) []*tensor.Tensor {
		logits := tensor.Scale(e.randn(rows, cols), 2)
		targets := ceTargets(e, rows, cols)
		loss, n := tensor.CrossEntropy(logits, targets, -100)
		dlogits := tensor.CrossEntropyBackward(logits, targets, e.randn(rows), -100)
		return []*tensor.Tensor{loss, tensor.Scalar(tensor.CPU(), tensor.Float64, float64(n)), dlogits}
	}}
}

// cePaddedCase: the padded cross-entropy over rows of width ld with
// classes real logits and padding of 1e30 (never read: the loss and the
// gradient of the classes equal the plain op's on the narrowed logits; the
// padding's gradient is zero).
func cePaddedCase(name string, rows, classes, ld int) opCase {
	return opCase{name: name, tol: 1e-5, run: func(e *env) []*tensor.Tensor {
		real := tensor.Scale(e.randn(rows, classes), 2)
		pad := tensor.Full(e.dev, e.dt, 1e30, rows, ld-classes)
		logits := tensor.Concat(1, real, pad)
		targets := ceTargets(e, rows, classes)
		dloss := e.randn(rows)
		loss, n := tensor.CrossEntropyPadded(logits, classes, targets, -100)
		want, _ := tensor.CrossEntropy(real, targets, -100)
		dlogits := tensor.CrossEntropyPaddedBackward(logits, classes, targets, dloss, -100)
		wantD := tensor.CrossEntropyBackward(real, targets, dloss, -100)
		return []*tensor.Tensor{loss, want, tensor.Scalar(tensor.CPU(), tensor.Float64, float64(n)), dlogits,
			dlogits.Narrow(1, 0, classes).Contiguous(), wantD, dlogits.Narrow(1, classes, ld-classes).Contiguous()}
	}}
}

// ceFusedCase: the fused cross-entropy against the padded forward and
// backward it replaces, and the count of its targets (half-precision
// gradients: TestCrossEntropyFusedHalfGradient).
func ceFusedCase(name string, rows, classes, ld int) opCase {
	return opCase{name: name, tol: 1e-5, run: func(e *env) []*tensor.Tensor {
		logits := ceLogits(e.dev, e.dt, e.randn(rows, classes), ld)
		targets := ceTargets(e, rows, classes)
		dloss := e.randn(rows)
		loss, dlogits := tensor.CrossEntropyFused(logits, classes, targets, dloss, -100, e.dt)
		want, n := tensor.CrossEntropyPadded(logits, classes, targets, -100)
		wantD := tensor.CrossEntropyPaddedBackward(logits, classes, targets, dloss, -100)
		return []*tensor.Tensor{loss, want, dlogits, wantD,
			tensor.Scalar(tensor.CPU(), tensor.Float64, float64(tensor.CountTargets(targets, -100)-n))}
	}}
}

// ceLogits scales x by 3 and pads its rows to ld columns of 1e30.
func ceLogits(dev tensor.Device, dt tensor.DType, x *tensor.Tensor, ld int) *tensor.Tensor {
	x = tensor.Scale(x, 3)
	rows, classes := x.Shape()[0], x.Shape()[1]
	if ld == classes {
		return x
	}
	return tensor.Concat(1, x, tensor.Full(dev, dt, 1e30, rows, ld-classes))
}

// ceTargets draws rows targets among classes, every third the ignore
// index -100.
func ceTargets(e *env, rows, classes int) *tensor.Tensor {
	tg := make([]int32, rows)
	for i := range tg {
		tg[i] = int32(e.rng.IntN(classes))
		if i%3 == 1 {
			tg[i] = -100
		}
	}
	return tensor.FromInt32s(e.dev, tg, rows)
}

// embeddingInto is dst after EmbeddingBackwardInto(dst, ids, dout).
func embeddingInto(dst, ids, dout *tensor.Tensor) *tensor.Tensor {
	tensor.EmbeddingBackwardInto(dst, ids, dout)
	return dst
}
