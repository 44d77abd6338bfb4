package autograd

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/strata-ml/strata/amp"
	"github.com/strata-ml/strata/tensor"
)

// maskCase is an op of TestVersionMasks: its float inputs' shapes, its
// int32 inputs (two sets, the second written over the first), and how to
// call it.
type maskCase struct {
	name string
	ins  [][]int                                        // float inputs' shapes
	ints func(c *tensor.Ctx, alt bool) []*tensor.Tensor // int inputs
	f    func(vs []*Var, ints []*tensor.Tensor) *Var
}

// maskVals are n values of a smooth pattern, other for each seed.
func maskVals(n int, seed float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(0.4*math.Sin(float64(i)*1.7+seed) + 0.3*math.Cos(float64(i)*0.3*seed+1) + 0.05)
	}
	return v
}

// maskNumel is the number of elements of shape s.
func maskNumel(s []int) int {
	n := 1
	for _, d := range s {
		n *= d
	}
	return n
}

// maskIDs is an int32 vector of xs in c.
func maskIDs(c *tensor.Ctx, xs ...int32) *tensor.Tensor {
	return c.FromInt32s(tensor.CPU(), xs, len(xs))
}

// TestVersionMasks checks every op's version checks (the .reads masks)
// against what its backward really reads: for each op, each set of inputs
// needing gradients, and each operand (an input, the output, the ids or
// targets) written in place between the forward pass and Backward, a
// run without the write, one with it, and one with it and the checks off.
// When the write changes the gradients, Backward must fail with
// ErrModified (else a backward read changed values in silence). A check
// that fires although the gradients would not change is logged: either
// a false ErrModified (PyTorch would not raise) or a write that happens
// to leave them equal.
func TestVersionMasks(t *testing.T) { versionMasks(t, false) }

// TestVersionMasksAutocast is TestVersionMasks under bf16 autocast, where
// products read half copies of their operands.
func TestVersionMasksAutocast(t *testing.T) { versionMasks(t, true) }

func versionMasks(t *testing.T, autocast bool) {
	cpu := tensor.CPU()
	cases := []maskCase{
		{name: "Add", ins: [][]int{{2, 3}, {2, 3}}, f: func(v []*Var, _ []*tensor.Tensor) *Var { return Add(v[0], v[1]) }},
		{name: "Sub", ins: [][]int{{2, 3}, {3}}, f: func(v []*Var, _ []*tensor.Tensor) *Var { return Sub(v[0], v[1]) }},
		{name: "Mul", ins: [][]int{{2, 3}, {2, 3}}, f: func(v []*Var, _ []*tensor.Tensor) *Var { return Mul(v[0], v[1]) }},
		{name: "Div", ins: [][]int{{2, 3}, {2, 3}}, f: func(v []*Var, _ []*tensor.Tensor) *Var { return Div(v[0], Exp(v[1])) }},
		{name: "Div2", ins: [][]int{{2, 3}, {2, 3}}, f: func(v []*Var, _ []*tensor.Tensor) *Var { return Div(v[0], v[1]) }},
		{name: "Affine", ins: [][]int{{2, 3}}, f: func(v []*Var, _ []*tensor.Tensor) *Var { return Affine(v[0], 2, 1) }},
		{name: "Exp", ins: [][]int{{2, 3}}, f: func(v []*Var, _ []*tensor.Tensor) *Var { return Exp(v[0]) }},
		{name: "Tanh", ins: [][]int{{2, 3}}, f: func(v []*Var, _ []*tensor.Tensor) *Var { return Tanh(v[0]) }},
		{name: "Gelu", ins: [][]int{{2, 3}}, f: func(v []*Var, _ []*tensor.Tensor) *Var { return Gelu(v[0]) }},
		{name: "Relu", ins: [][]int{{2, 3}}, f: func(v []*Var, _ []*tensor.Tensor) *Var { return Relu(v[0]) }},
		{name: "Silu", ins: [][]int{{2, 3}}, f: func(v []*Var, _ []*tensor.Tensor) *Var { return Silu(v[0]) }},
		{name: "Unary-all", ins: [][]int{{2, 3}}, f: func(v []*Var, _ []*tensor.Tensor) *Var {
			x := v[0]
			var acc *Var
			for op := tensor.UnaryOp(0); op < 64; op++ {
				if op.String() == "" || op.String()[0] == 'U' || op == tensor.OpLog || op == tensor.OpSqrt || op == tensor.OpRsqrt || op == tensor.OpRecip {
					continue
				}
				func() {
					defer func() { recover() }()
					y := Unary(op, x)
					if acc == nil {
						acc = y
					} else {
						acc = Add(acc, y)
					}
				}()
			}
			return acc
		}},
		{name: "MatMul", ins: [][]int{{2, 3}, {3, 4}}, f: func(v []*Var, _ []*tensor.Tensor) *Var { return MatMul(v[0], v[1]) }},
		{name: "MatMulB", ins: [][]int{{2, 2, 3}, {3, 4}}, f: func(v []*Var, _ []*tensor.Tensor) *Var { return MatMul(v[0], v[1]) }},
		{name: "Linear", ins: [][]int{{2, 3}, {4, 3}, {4}}, f: func(v []*Var, _ []*tensor.Tensor) *Var { return Linear(v[0], v[1], v[2]) }},
		{name: "LinearNoBias", ins: [][]int{{2, 3}, {4, 3}}, f: func(v []*Var, _ []*tensor.Tensor) *Var { return Linear(v[0], v[1], nil) }},
		{name: "GeluLinear", ins: [][]int{{2, 3}, {4, 3}, {4}}, f: func(v []*Var, _ []*tensor.Tensor) *Var { return GeluLinear(v[0], v[1], v[2]) }},
		{name: "GeluLinearKept", ins: [][]int{{2, 3}, {4, 3}, {4}}, f: func(v []*Var, _ []*tensor.Tensor) *Var { return GeluLinearKept(v[0], v[1], v[2]) }},
		{name: "Softmax", ins: [][]int{{2, 3}}, f: func(v []*Var, _ []*tensor.Tensor) *Var { return Softmax(v[0]) }},
		{name: "LogSoftmax", ins: [][]int{{2, 3}}, f: func(v []*Var, _ []*tensor.Tensor) *Var { return LogSoftmax(v[0]) }},
		{name: "CausalSoftmax", ins: [][]int{{3, 3}}, f: func(v []*Var, _ []*tensor.Tensor) *Var { return CausalSoftmax(v[0]) }},
		{name: "CausalMask", ins: [][]int{{3, 3}}, f: func(v []*Var, _ []*tensor.Tensor) *Var { return CausalMask(v[0], -5) }},
		{name: "LayerNorm", ins: [][]int{{2, 3}, {3}, {3}}, f: func(v []*Var, _ []*tensor.Tensor) *Var { return LayerNorm(v[0], v[1], v[2], 1e-5) }},
		{name: "Embedding", ins: [][]int{{4, 2}}, ints: func(c *tensor.Ctx, alt bool) []*tensor.Tensor {
			if alt {
				return []*tensor.Tensor{maskIDs(c, 3, 3, 2)}
			}
			return []*tensor.Tensor{maskIDs(c, 0, 1, 1)}
		}, f: func(v []*Var, i []*tensor.Tensor) *Var { return Embedding(v[0], i[0]) }},
		{name: "CrossEntropy", ins: [][]int{{3, 4}}, ints: func(c *tensor.Ctx, alt bool) []*tensor.Tensor {
			if alt {
				return []*tensor.Tensor{maskIDs(c, 3, 0, 0)}
			}
			return []*tensor.Tensor{maskIDs(c, 0, 1, 2)}
		}, f: func(v []*Var, i []*tensor.Tensor) *Var { return CrossEntropy(v[0], i[0]) }},
		{name: "LinearCrossEntropy", ins: [][]int{{3, 2}, {4, 2}}, ints: func(c *tensor.Ctx, alt bool) []*tensor.Tensor {
			if alt {
				return []*tensor.Tensor{maskIDs(c, 3, 0, 0)}
			}
			return []*tensor.Tensor{maskIDs(c, 0, 1, 2)}
		}, f: func(v []*Var, i []*tensor.Tensor) *Var { return LinearCrossEntropy(v[0], v[1], i[0], 2) }},
		{name: "Dropout", ins: [][]int{{2, 3}}, f: func(v []*Var, _ []*tensor.Tensor) *Var { return Dropout(v[0], 0.3, 1, 0) }},
		{name: "Cast", ins: [][]int{{2, 3}}, f: func(v []*Var, _ []*tensor.Tensor) *Var { return Cast(Cast(v[0], tensor.Float64), tensor.Float32) }},
		{name: "Reshape", ins: [][]int{{2, 3}}, f: func(v []*Var, _ []*tensor.Tensor) *Var { return Reshape(v[0], 3, 2) }},
		{name: "Transpose", ins: [][]int{{2, 3}}, f: func(v []*Var, _ []*tensor.Tensor) *Var { return Contiguous(Transpose(v[0], 0, 1)) }},
		{name: "Narrow", ins: [][]int{{4, 3}}, f: func(v []*Var, _ []*tensor.Tensor) *Var { return Narrow(v[0], 0, 1, 2) }},
		{name: "Sum", ins: [][]int{{2, 3}}, f: func(v []*Var, _ []*tensor.Tensor) *Var { return Sum(v[0], true, 1) }},
		{name: "Mean", ins: [][]int{{2, 3}}, f: func(v []*Var, _ []*tensor.Tensor) *Var { return Mean(v[0], true, 0) }},
		{name: "CausalAttention", ins: [][]int{{1, 2, 3, 4}, {1, 2, 3, 4}, {1, 2, 3, 4}}, f: func(v []*Var, _ []*tensor.Tensor) *Var { return CausalAttention(v[0], v[1], v[2], 0, 0, 0) }},
		{name: "CausalAttentionDrop", ins: [][]int{{1, 2, 3, 4}, {1, 2, 3, 4}, {1, 2, 3, 4}}, f: func(v []*Var, _ []*tensor.Tensor) *Var { return CausalAttention(v[0], v[1], v[2], 0.2, 3, 0) }},
		{name: "FusedCausalAttention", ins: [][]int{{1, 2, 3, 4}, {1, 2, 3, 4}, {1, 2, 3, 4}}, f: func(v []*Var, _ []*tensor.Tensor) *Var { return FusedCausalAttention(v[0], v[1], v[2], 0, 0, 0) }},
		{name: "FusedCausalAttentionQKV", ins: [][]int{{1, 3, 24}}, f: func(v []*Var, _ []*tensor.Tensor) *Var { return FusedCausalAttentionQKV(v[0], 2, 0, 0, 0) }},
	}
	type result struct {
		err   error
		grads [][]float32
	}
	for _, k := range cases {
		n := len(k.ins)
		for mask := 1; mask < 1<<n; mask++ {
			targets := n + 2 // inputs, output, int input 0
			for tgt := 0; tgt < targets; tgt++ {
				if tgt == n+1 && k.ints == nil {
					continue
				}
				run := func(modify, skip bool) (r result) {
					c := tensor.NewCtx()
					defer func() {
						if p := recover(); p != nil {
							r.err = fmt.Errorf("panic: %v", p)
						}
					}()
					versionChecks = !skip
					defer func() { versionChecks = true }()
					c.WithScope(func() {
						vs := make([]*Var, n)
						for i, s := range k.ins {
							x := c.FromFloat32s(cpu, maskVals(maskNumel(s), float64(i+1)), s...)
							// A leaf needing a gradient, its value in c's scope
							// (a Param's is kept, and ops on kept tensors alone
							// make outputs no scope owns).
							vs[i] = Const(x)
							vs[i].name = fmt.Sprint("in", i)
							vs[i].SetRequiresGrad(mask&(1<<i) != 0)
						}
						var is []*tensor.Tensor
						if k.ints != nil {
							is = k.ints(c, false)
						}
						var y *Var
						if autocast {
							amp.Autocast(c, tensor.BFloat16, func() { y = k.f(vs, is) })
						} else {
							y = k.f(vs, is)
						}
						if !y.RequiresGrad() {
							r.err = errors.New("nograd")
							return
						}
						if modify {
							switch {
							case tgt < n:
								x := vs[tgt].Value
								x.CopyFrom(c.FromFloat32s(cpu, maskVals(x.Numel(), 9+float64(tgt)), x.Shape()...))
							case tgt == n:
								if !y.Value.IsContiguous() || y.Value.Rank() == 0 {
									r.err = errors.New("skip")
									return
								}
								x := y.Value
								x.CopyFrom(c.FromFloat32s(cpu, maskVals(x.Numel(), 13), x.Shape()...))
							default:
								is[0].CopyFrom(k.ints(c, true)[0])
							}
						}
						s := y.Value.Shape()
						R := Const(c.FromFloat32s(cpu, maskVals(maskNumel(s), 5), s...))
						loss := Sum(Mul(y, R), false)
						r.err = tensor.Try(func() {
							if err := loss.Backward(); err != nil {
								panic(err)
							}
						})
						for i := range vs {
							if mask&(1<<i) != 0 && vs[i].Grad != nil {
								r.grads = append(r.grads, vs[i].Grad.Float32s())
							} else {
								r.grads = append(r.grads, nil)
							}
							vs[i].ZeroGrad()
						}
					})
					return r
				}
				ref := run(false, false)
				if ref.err != nil {
					if ref.err.Error() != "nograd" {
						t.Errorf("%s mask %b: ref: %v", k.name, mask, ref.err)
					}
					continue
				}
				chk := run(true, false)
				raw := run(true, true)
				if chk.err != nil && chk.err.Error() == "skip" {
					continue
				}
				what := fmt.Sprintf("input %d", tgt)
				if tgt == n {
					what = "output"
				} else if tgt == n+1 {
					what = "int input"
				}
				same := raw.err == nil && equalGrads(ref.grads, raw.grads)
				isMod := chk.err != nil && errors.Is(chk.err, ErrModified)
				switch {
				case chk.err != nil && !isMod:
					t.Errorf("%s mask %b %s: other error %v", k.name, mask, what, chk.err)
				case !isMod && !same:
					t.Errorf("%s, inputs %b needing gradients, %s written: no ErrModified, and the gradients changed (%v vs %v)", k.name, mask, what, ref.grads, raw.grads)
				case isMod && same:
					t.Logf("%s, inputs %b needing gradients, %s written: ErrModified, the gradients would not change", k.name, mask, what)
				}
			}
		}
	}
}

// equalGrads reports whether a and b hold the same gradients within
// float32 rounding.
func equalGrads(a, b [][]float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if len(a[i]) != len(b[i]) {
			return false
		}
		for j := range a[i] {
			d := math.Abs(float64(a[i][j] - b[i][j]))
			if d > 1e-6*(1+math.Abs(float64(a[i][j]))) {
				return false
			}
		}
	}
	return true
}
