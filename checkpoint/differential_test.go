package checkpoint_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/amp"
	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/checkpoint"
	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/tensor"
)

// Randomized differential testing of checkpointed regions against the
// plain graph: random programs of autograd ops, random sub-programs
// wrapped in regions (nested, with policies and offload), compared bit
// for bit.

const (
	fzB, fzT, fzD, fzH, fzV = 2, 3, 8, 2, 5
)

type fzParams struct {
	w                                           [3]*autograd.Var
	b                                           [3]*autograd.Var
	lnW, lnB, table, w3, b3, wn, w1, b1, w2, b2 *autograd.Var
}

func (p *fzParams) all() []*autograd.Var {
	return []*autograd.Var{p.w[0], p.w[1], p.w[2], p.b[0], p.b[1], p.b[2], p.lnW, p.lnB, p.table, p.w3, p.b3, p.wn, p.w1, p.b1, p.w2, p.b2}
}

func newFzParams(seed uint64) *fzParams {
	rng := rand.New(rand.NewPCG(seed, 7))
	mk := func(std float64, shape ...int) *autograd.Var {
		t, err := tensor.NewKept(tensor.CPU(), tensor.Float32, memory.RoleParameter, shape...)
		if err != nil {
			panic(err)
		}
		c := tensor.NewCtx()
		c.WithScope(func() { t.CopyFrom(c.RandN(tensor.CPU(), tensor.Float32, rng, std, shape...)) })
		return autograd.Param(t, "p")
	}
	p := &fzParams{}
	for i := range p.w {
		p.w[i] = mk(0.4, fzD, fzD)
		p.b[i] = mk(0.1, fzD)
	}
	p.lnW, p.lnB = mk(0.3, fzD), mk(0.1, fzD)
	p.table = mk(0.5, fzV, fzD)
	p.w3, p.b3 = mk(0.4, 3*fzD, fzD), mk(0.1, 3*fzD)
	p.wn = mk(0.4, fzD, fzD/2)
	p.w1, p.b1 = mk(0.3, 4*fzD, fzD), mk(0.1, 4*fzD)
	p.w2, p.b2 = mk(0.3, fzD, 4*fzD), mk(0.1, fzD)
	return p
}

func (p *fzParams) release() {
	for _, v := range p.all() {
		v.ZeroGrad()
		v.Value.Release()
	}
}

const (
	opLinear = iota
	opMatMulT
	opAdd
	opMul
	opAddBias
	opMulMean
	opGelu
	opTanh
	opExp
	opLayerNorm
	opSoftmax
	opCausalAttention
	opFusedAttention
	opFusedQKV
	opDropout
	opEmbedding
	opNarrow
	opTranspose
	opCast
	opGeluLinear
	opHalf
	opPlainAttention
	opDiv
	opSilu
	opSumBcast
	opCausalSoftmax
	numOps
	opRegion = 100
)

var fzOpNames = map[int]string{opLinear: "Linear", opMatMulT: "MatMulT", opAdd: "Add", opMul: "Mul", opAddBias: "AddBias",
	opMulMean: "MulMean", opGelu: "Gelu", opTanh: "Tanh", opExp: "Exp", opLayerNorm: "LayerNorm", opSoftmax: "Softmax",
	opCausalAttention: "CausalAttention", opFusedAttention: "FusedAttention", opFusedQKV: "FusedQKV", opDropout: "Dropout",
	opEmbedding: "Embedding", opNarrow: "Narrow", opTranspose: "Transpose", opCast: "Cast", opGeluLinear: "GeluLinear",
	opHalf: "Half", opPlainAttention: "PlainAttention", opDiv: "Div", opSilu: "Silu", opSumBcast: "SumBcast",
	opCausalSoftmax: "CausalSoftmax", opRegion: "Region"}

type fzOp struct {
	kind    int
	id      int // its parameters' set
	a, b, c int // env indices
	p       int
	seed    uint64
	// region
	ins      []int
	sub      []fzOp
	policy   int
	offload  bool
	autocast int // 0 none, 1 bf16, 2 fp16 inside the region's function
	twice    bool
	nilIn    bool
}

type fzProg struct {
	ops      []fzOp
	outs     []int // top-level vars summed into the loss
	autocast int
	keep     int
	ahead    int
	mode     int   // 0 Backward, 1 RetainGraph twice, 2 Grad
	wrt      []int // Grad: param indices (-1: the input)
}

func (o fzOp) String() string {
	if o.kind == opRegion {
		var sb strings.Builder
		fmt.Fprintf(&sb, "Region#%d(ins=%v pol=%d off=%v ac=%d twice=%v nil=%v){", o.id, o.ins, o.policy, o.offload, o.autocast, o.twice, o.nilIn)
		for i, s := range o.sub {
			if i > 0 {
				sb.WriteString("; ")
			}
			sb.WriteString(s.String())
		}
		sb.WriteString("}")
		return sb.String()
	}
	return fmt.Sprintf("%s(%d,%d,%d p%d)", fzOpNames[o.kind], o.a, o.b, o.c, o.p)
}

func (p fzProg) String() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "ac=%d keep=%d ahead=%d mode=%d wrt=%v outs=%v\n", p.autocast, p.keep, p.ahead, p.mode, p.wrt, p.outs)
	for i, o := range p.ops {
		fmt.Fprintf(&sb, "  %d: %v\n", i, o)
	}
	return sb.String()
}

// State of a var at one level: free, used by plain ops, used by a region
// (exclusive), or not available here.
const (
	stFree = iota
	stPlain
	stRegion
	stNone
)

type fzGen struct {
	rng    *rand.Rand
	strict bool
	next   int
}

// genOps generates n ops over an env of len(st) vars with states st.
func (g *fzGen) genOps(st []int, n, depth int) []fzOp {
	st = append([]int(nil), st...)
	var ops []fzOp
	pick := func(forRegion bool) int {
		var cand []int
		for i, s := range st {
			if s == stFree || (!forRegion && s == stPlain) || (!g.strict && s != stNone) {
				cand = append(cand, i)
			}
		}
		if len(cand) == 0 {
			return -1
		}
		// favour recent vars
		if g.rng.IntN(3) > 0 {
			return cand[len(cand)-1-g.rng.IntN(min(3, len(cand)))]
		}
		return cand[g.rng.IntN(len(cand))]
	}
	for len(ops) < n {
		if depth < 2 && g.rng.IntN(3) == 0 {
			// a region
			r := fzOp{kind: opRegion, policy: g.rng.IntN(5), offload: g.rng.IntN(3) == 0, twice: g.rng.IntN(6) == 0, nilIn: g.rng.IntN(6) == 0}
			g.next++
			r.id = g.next
			if g.rng.IntN(5) == 0 {
				r.autocast = 1 + g.rng.IntN(2)
			}
			k := 1 + g.rng.IntN(3)
			for j := 0; j < k; j++ {
				if i := pick(true); i >= 0 && !contains(r.ins, i) {
					r.ins = append(r.ins, i)
				}
			}
			if len(r.ins) == 0 {
				continue
			}
			sub := make([]int, len(st))
			for i, s := range st {
				if s == stFree && g.strict || !g.strict && s != stNone {
					sub[i] = stFree
				} else {
					sub[i] = stNone
				}
			}
			r.sub = g.genOps(sub, 1+g.rng.IntN(4), depth+1)
			// what the sub-program used of this env (all its uses, any depth)
			u := make([]bool, len(st))
			markUses(r.sub, len(st), u)
			for _, i := range r.ins {
				u[i] = true
			}
			for i, b := range u {
				if b {
					st[i] = stRegion
				}
			}
			ops = append(ops, r)
			st = append(st, stFree)
			continue
		}
		o := fzOp{kind: g.rng.IntN(numOps), p: g.rng.IntN(3), seed: g.rng.Uint64() % 1000}
		if o.kind == opTranspose && os.Getenv("FZ_NOTRANSPOSE") != "" {
			o.kind = opTanh // a region's input gradient comes back contiguous (not fixed)
		}
		g.next++
		o.id = g.next
		if !g.strict {
			o.id = o.p
		}
		o.a, o.b, o.c = pick(false), pick(false), pick(false)
		if o.a < 0 {
			continue
		}
		for _, i := range []int{o.a, o.b, o.c} {
			if i >= 0 && st[i] == stFree {
				st[i] = stPlain
			}
		}
		ops = append(ops, o)
		st = append(st, stFree)
	}
	return ops
}

// markUses marks the vars below n that ops (an env that starts with n
// vars) use, at any depth.
func markUses(ops []fzOp, n int, u []bool) {
	for _, o := range ops {
		if o.kind == opRegion {
			for _, i := range o.ins {
				if i < n {
					u[i] = true
				}
			}
			markUses(o.sub, n, u)
			continue
		}
		for _, i := range []int{o.a, o.b, o.c} {
			if i >= 0 && i < n {
				u[i] = true
			}
		}
	}
}

func contains(s []int, x int) bool {
	for _, y := range s {
		if x == y {
			return true
		}
	}
	return false
}

func genProg(seed uint64, strict bool) fzProg {
	g := &fzGen{rng: rand.New(rand.NewPCG(seed, 99)), strict: strict}
	st := []int{stFree, stFree} // the input leaf, an embedding
	var p fzProg
	p.ops = g.genOps(st, 2+g.rng.IntN(6), 0)
	// the loss: the last var and some others not used by a region
	n := len(st) + len(p.ops)
	fin := make([]int, n)
	copy(fin, st)
	// recompute states at top level
	for k, o := range p.ops {
		if o.kind == opRegion {
			uu := make([]bool, n)
			markUses(o.sub, len(st)+k, uu)
			for _, i := range o.ins {
				uu[i] = true
			}
			for i, b := range uu {
				if b {
					fin[i] = stRegion
				}
			}
		}
	}
	p.outs = []int{n - 1}
	for i := 0; i < n-1; i++ {
		if fin[i] != stRegion && g.rng.IntN(3) == 0 {
			p.outs = append(p.outs, i)
		}
	}
	if g.rng.IntN(3) == 0 {
		p.autocast = 1 + g.rng.IntN(2)
	}
	p.keep = g.rng.IntN(4) - 1
	p.ahead = g.rng.IntN(3) - 1
	p.mode = g.rng.IntN(3)
	return p
}

type fzRun struct {
	c   *tensor.Ctx
	ps  *fzSets
	ck  bool
	off *checkpoint.Offload
}

func half(k int) tensor.DType {
	if k == 2 {
		return tensor.Float16
	}
	return tensor.BFloat16
}

func (r *fzRun) heads(x *autograd.Var) *autograd.Var {
	return autograd.Transpose(autograd.Reshape(x, fzB, fzT, fzH, fzD/fzH), 1, 2)
}

func (r *fzRun) merge(x *autograd.Var) *autograd.Var {
	return autograd.Reshape(autograd.Transpose(x, 1, 2), fzB, fzT, fzD)
}

func (r *fzRun) ids(seed uint64) *tensor.Tensor {
	rng := rand.New(rand.NewPCG(seed, 1))
	d := make([]int32, fzB*fzT)
	for i := range d {
		d[i] = int32(rng.IntN(fzV))
	}
	return r.c.FromInt32s(tensor.CPU(), d, fzB, fzT)
}

func (r *fzRun) op(o fzOp, env []*autograd.Var) *autograd.Var {
	ps := r.ps.get(o.id)
	a := env[o.a]
	get := func(i int) *autograd.Var {
		if i < 0 {
			return a
		}
		return env[i]
	}
	b, cc := get(o.b), get(o.c)
	switch o.kind {
	case opLinear:
		bias := ps.b[o.p]
		if o.seed%2 == 0 {
			bias = nil
		}
		return autograd.Linear(a, ps.w[o.p], bias)
	case opMatMulT:
		return autograd.MatMul(a, autograd.Transpose(ps.w[o.p], 0, 1))
	case opAdd:
		return autograd.Add(a, b)
	case opMul:
		return autograd.Mul(a, b)
	case opAddBias:
		return autograd.Add(a, ps.b[o.p])
	case opMulMean:
		return autograd.Mul(a, autograd.Mean(b, true, 2))
	case opGelu:
		return autograd.Gelu(a)
	case opTanh:
		return autograd.Tanh(a)
	case opExp:
		return autograd.Exp(autograd.Scale(a, 0.1))
	case opLayerNorm:
		return autograd.LayerNorm(a, ps.lnW, ps.lnB, 1e-5)
	case opSoftmax:
		return autograd.Softmax(a)
	case opCausalAttention, opFusedAttention:
		ctx := tensor.CtxOf(a.Value, b.Value, cc.Value)
		p := 0.0
		var off uint64
		if o.seed%2 == 0 {
			p = 0.2
			off = autograd.RandomOffset(ctx, fzB*fzH*fzT*fzT)
		}
		q, k, v := r.heads(a), r.heads(b), r.heads(cc)
		if o.kind == opCausalAttention {
			return r.merge(autograd.CausalAttention(q, k, v, p, o.seed, off))
		}
		return r.merge(autograd.FusedCausalAttention(q, k, v, p, o.seed, off))
	case opFusedQKV:
		p := 0.0
		var off uint64
		if o.seed%2 == 0 {
			p = 0.2
			off = autograd.RandomOffset(a.Value.Ctx(), fzB*fzH*fzT*fzT)
		}
		return autograd.FusedCausalAttentionQKV(autograd.Linear(a, ps.w3, ps.b3), fzH, p, o.seed, off)
	case opDropout:
		return autograd.Dropout(a, 0.2, o.seed, autograd.RandomOffset(a.Value.Ctx(), a.Value.Numel()))
	case opEmbedding:
		return autograd.Add(a, autograd.Embedding(ps.table, r.ids(o.seed)))
	case opNarrow:
		h := autograd.Add(autograd.Narrow(a, 2, 0, fzD/2), autograd.Narrow(b, 2, fzD/2, fzD/2))
		return autograd.Linear(h, ps.wn, nil)
	case opTranspose:
		return autograd.Reshape(autograd.Transpose(a, 0, 1), fzB, fzT, fzD)
	case opCast:
		dt := tensor.BFloat16
		if o.seed%2 == 0 {
			dt = tensor.Float16
		}
		return autograd.Cast(autograd.Cast(a, dt), tensor.Float32)
	case opGeluLinear:
		return autograd.GeluLinear(autograd.Linear(a, ps.w1, ps.b1), ps.w2, ps.b2)
	case opHalf:
		h := autograd.LinearHalf(autograd.LayerNormHalf(a, ps.lnW, ps.lnB, 1e-5), ps.w[o.p], ps.b[o.p])
		if h.Value.DType() != tensor.Float32 {
			h = autograd.Cast(h, tensor.Float32)
		}
		return h
	case opPlainAttention:
		s := autograd.Scale(autograd.MatMul(a, autograd.Transpose(b, 1, 2)), 0.3)
		return autograd.MatMul(autograd.Softmax(s), cc)
	case opCausalSoftmax:
		s := autograd.Scale(autograd.MatMul(a, autograd.Transpose(b, 1, 2)), 0.3)
		return autograd.MatMul(autograd.CausalSoftmax(s), cc)
	case opDiv:
		return autograd.Div(a, autograd.Affine(autograd.Exp(autograd.Scale(b, 0.1)), 1, 1))
	case opSilu:
		return autograd.Silu(a)
	case opSumBcast:
		return autograd.Add(b, autograd.Scale(autograd.Sum(a, true, 1), 0.1))
	}
	panic("op")
}

func (r *fzRun) policy(k int) checkpoint.Policy {
	switch k {
	case 1:
		return checkpoint.SaveMatMuls
	case 2:
		return checkpoint.SaveMatMulsUpTo(fzB * fzT * fzD * 4)
	case 3:
		return checkpoint.SaveOps("LayerNorm", "Softmax", "Gelu", "CausalSoftmax")
	case 4:
		return checkpoint.SaveOps("MatMul", "Linear", "GeluLinear", "Gelu", "CausalAttention", "FusedCausalAttention", "LayerNorm", "Softmax", "CausalSoftmax")
	}
	return nil
}

func withAutocast(c *tensor.Ctx, k int, fn func()) {
	if k == 0 {
		fn()
		return
	}
	amp.Autocast(c, half(k), fn)
}

func (r *fzRun) exec(ops []fzOp, env []*autograd.Var) []*autograd.Var {
	env = append([]*autograd.Var(nil), env...)
	for _, o := range ops {
		if o.kind != opRegion {
			env = append(env, r.op(o, env))
			continue
		}
		o := o
		body := func(inner []*autograd.Var) *autograd.Var {
			var out *autograd.Var
			withAutocast(r.c, o.autocast, func() {
				e := r.exec(o.sub, inner)
				out = e[len(e)-1]
			})
			return out
		}
		if only := os.Getenv("FZ_ONLY"); !r.ck || only != "" && only != strconv.Itoa(o.id) {
			env = append(env, body(env))
			continue
		}
		ins := make([]*autograd.Var, 0, len(o.ins)+2)
		for _, i := range o.ins {
			ins = append(ins, env[i])
		}
		if o.twice && os.Getenv("FZ_NOTWICE") == "" {
			ins = append(ins, env[o.ins[0]])
		}
		if o.nilIn && os.Getenv("FZ_NONIL") == "" {
			ins = append(ins, nil)
		}
		opts := checkpoint.Options{Policy: r.policy(o.policy)}
		if os.Getenv("FZ_NOPOL") != "" {
			opts.Policy = nil
		}
		if o.offload && os.Getenv("FZ_NOOFF") == "" {
			opts.Offload = r.off
		}
		outer := env
		env = append(env, opts.Apply(func(in ...*autograd.Var) *autograd.Var {
			inner := append([]*autograd.Var(nil), outer...)
			for k, i := range o.ins {
				inner[i] = in[k]
			}
			return body(inner)
		}, ins...))
	}
	return env
}

// fzSets are the parameter sets of a program's ops, by id.
type fzSets struct{ m map[int]*fzParams }

func (s *fzSets) get(id int) *fzParams {
	if s.m == nil {
		s.m = map[int]*fzParams{}
	}
	if s.m[id] == nil {
		s.m[id] = newFzParams(uint64(id) + 1)
	}
	return s.m[id]
}

func (s *fzSets) all() []*autograd.Var {
	var vs []*autograd.Var
	for id := 0; id < 1000; id++ {
		if p := s.m[id]; p != nil {
			vs = append(vs, p.all()...)
		}
	}
	return vs
}

func (s *fzSets) release() {
	for _, p := range s.m {
		p.release()
	}
	s.m = nil
}

type fzResult struct {
	loss  uint32
	grads [][]float32
	rng   uint64
	names []string
}

func fzExec(p fzProg, ps *fzSets, ck bool) (res fzResult, err error) {
	c := tensor.NewCtx()
	autograd.SetRandomState(c, 77)
	r := &fzRun{c: c, ps: ps, ck: ck, off: &checkpoint.Offload{Keep: p.keep, Ahead: p.ahead}}
	err = tensor.Try(func() {
		c.WithScope(func() {
			rng := rand.New(rand.NewPCG(3, 4))
			x := autograd.Const(c.RandN(tensor.CPU(), tensor.Float32, rng, 1, fzB, fzT, fzD)).Detach()
			x.SetRequiresGrad(true)
			var loss *autograd.Var
			withAutocast(c, p.autocast, func() {
				e0 := autograd.Embedding(ps.get(0).table, r.ids(12345))
				env := r.exec(p.ops, []*autograd.Var{x, e0})
				for _, i := range p.outs {
					w := autograd.Const(c.RandN(tensor.CPU(), tensor.Float32, rng, 1, fzB, fzT, fzD))
					term := autograd.Sum(autograd.Mul(env[i], w), false)
					if loss == nil {
						loss = term
					} else {
						loss = autograd.Add(loss, term)
					}
				}
			})
			res.loss = math.Float32bits(loss.Value.Float32s()[0])
			all := append([]*autograd.Var{x}, ps.all()...)
			switch p.mode {
			case 0, 1:
				collect := func() {
					for i, v := range all {
						if v.Grad == nil {
							res.grads = append(res.grads, nil)
						} else {
							res.grads = append(res.grads, v.Grad.Float32s())
						}
						res.names = append(res.names, strconv.Itoa(i-1))
						v.ZeroGrad()
					}
				}
				if p.mode == 1 {
					if e := loss.BackwardOpts(autograd.BackwardOptions{RetainGraph: true}); e != nil {
						panic(e)
					}
					collect()
				}
				if e := loss.Backward(); e != nil {
					panic(e)
				}
				collect()
			case 2:
				var wrt []*autograd.Var
				wr := rand.New(rand.NewPCG(uint64(len(all)), 5))
				for i, v := range all {
					if wr.IntN(3) == 0 || i == 0 {
						wrt = append(wrt, v)
						p.wrt = append(p.wrt, i-1)
					}
				}
				gs, e := autograd.Grad(loss, wrt, autograd.GradOptions{AllowUnused: true})
				if e != nil {
					panic(e)
				}
				for k, gt := range gs {
					if gt == nil {
						res.grads = append(res.grads, nil)
					} else {
						res.grads = append(res.grads, gt.Float32s())
					}
					res.names = append(res.names, strconv.Itoa(p.wrt[k]))
				}
				for _, v := range all {
					if v.Grad != nil {
						panic(&tensor.OpError{Op: "fuzz", Msg: "Grad changed a leaf's Grad", Err: tensor.ErrArgument})
					}
				}
			}
			res.rng = autograd.RandomState(c)
			x.ZeroGrad()
		})
	})
	for _, v := range ps.all() {
		v.ZeroGrad()
	}
	if err == nil && c.BytesInUse() != 0 {
		err = fmt.Errorf("%d bytes left in the context", c.BytesInUse())
	}
	return res, err
}

func fzCompare(want, got fzResult) string {
	if want.loss != got.loss {
		return fmt.Sprintf("loss %v, want %v", math.Float32frombits(got.loss), math.Float32frombits(want.loss))
	}
	if want.rng != got.rng {
		return fmt.Sprintf("rng %d, want %d", got.rng, want.rng)
	}
	for i := range want.grads {
		if (want.grads[i] == nil) != (got.grads[i] == nil) {
			return fmt.Sprintf("grad %s: nil %v, want nil %v", want.names[i], got.grads[i] == nil, want.grads[i] == nil)
		}
		for j := range want.grads[i] {
			if math.Float32bits(want.grads[i][j]) != math.Float32bits(got.grads[i][j]) {
				return fmt.Sprintf("grad %s [%d]: %v, want %v", want.names[i], j, got.grads[i][j], want.grads[i][j])
			}
		}
	}
	return ""
}

func fzClose(want, got fzResult) bool {
	near := func(a, b float32) bool {
		return math.Abs(float64(a-b)) <= 1e-4*(1+math.Abs(float64(a)))
	}
	if !near(math.Float32frombits(want.loss), math.Float32frombits(got.loss)) || want.rng != got.rng {
		return false
	}
	for i := range want.grads {
		if (want.grads[i] == nil) != (got.grads[i] == nil) {
			return false
		}
		for j := range want.grads[i] {
			if !near(want.grads[i][j], got.grads[i][j]) {
				return false
			}
		}
	}
	return true
}

// TestFuzzMatchesPlain runs random programs of autograd ops (products,
// broadcasting arithmetic, the attentions, dropout, embeddings, norms,
// narrows, transposes, casts) plain and with random sub-programs
// checkpointed (nested, with policies, offload and autocast inside), in a
// Backward pass, two with RetainGraph or a Grad pass, and compares the
// loss, every gradient and the random stream bit for bit, and that
// nothing is left in use. Each op has parameters of its own and a var a
// region uses goes to it alone (the package doc's conditions for bit for
// bit). FZ_N and FZ_START pick the seeds; FZ_LOOSE shares parameters and
// vars (compared to 1e-4), where a region's function may read a var off
// its result's path, which the package doc asks to pass or Retain;
// FZ_ONLY=id checkpoints that region alone, FZ_MODE, FZ_NOPOL, FZ_NOOFF,
// FZ_NOTWICE, FZ_NONIL and FZ_NOTRANSPOSE narrow a failure down.
func TestFuzzMatchesPlain(t *testing.T) {
	n := 300
	if s := os.Getenv("FZ_N"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	start := uint64(0)
	if s := os.Getenv("FZ_START"); s != "" {
		v, _ := strconv.Atoi(s)
		start = uint64(v)
	}
	strict := os.Getenv("FZ_LOOSE") == ""
	ps := &fzSets{}
	defer ps.release()
	base := tensor.CPU().Memory().InUse()
	fails := 0
	for seed := start; seed < start+uint64(n); seed++ {
		p := genProg(seed, strict)
		if m := os.Getenv("FZ_MODE"); m != "" {
			p.mode, _ = strconv.Atoi(m)
		}
		want, err := fzExec(p, ps, false)
		if err != nil {
			t.Logf("seed %d: plain run failed: %v\n%v", seed, err, p)
			ps.release()
			continue
		}
		got, err := fzExec(p, ps, true)
		ps.release()
		msg := ""
		if err != nil {
			msg = "checkpointed run failed: " + err.Error()
		} else {
			msg = fzCompare(want, got)
			if !strict && msg != "" && fzClose(want, got) {
				msg = ""
			}
		}
		if inUse := tensor.CPU().Memory().InUse(); inUse != base {
			msg += fmt.Sprintf(" [%d bytes in use, want %d]", inUse, base)
			base = inUse
		}
		if msg != "" {
			fails++
			t.Errorf("seed %d: %s\n%v", seed, msg, p)
			if fails > 10 {
				break
			}
		}
	}
	require.Zero(t, fails)
}
