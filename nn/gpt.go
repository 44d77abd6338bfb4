package nn

import (
	"fmt"
	"math"
	"slices"
	"sync/atomic"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/checkpoint"
	"github.com/strata-ml/strata/tensor"
)

// GPT is a decoder-only transformer in nanoGPT's layout: token and
// position embeddings, pre-norm blocks (attention and MLP with residual
// connections), a final LayerNorm and an output head tied to the token
// embedding. Parameter names are nanoGPT's state_dict keys.
type GPT struct {
	Config GPTConfig
	Wte    *Embedding // transformer.wte
	Wpe    *Embedding // transformer.wpe
	Blocks []*Block   // transformer.h.N
	LnF    *LayerNorm // transformer.ln_f
	Drop   *Dropout
	// Checkpoint says which blocks are checkpointed (recomputed in
	// backward instead of keeping their activations); none by default.
	// Results and gradients are bit-identical in every mode.
	Checkpoint Checkpointing
	// HeadLoss says how Loss computes the output head and its loss: the
	// full logits (default), or fused and chunked so that they are never
	// all held (head.go).
	HeadLoss HeadLoss

	offload atomic.Pointer[checkpoint.Offload] // Checkpoint.Offload's (checkpoint.go)
	wide    atomic.Pointer[wideStats]          // the last selective pass's, for KeepWide (checkpoint.go)
}

// Block is one transformer block: x + attn(ln_1(x)), then + mlp(ln_2(x)).
// Ln1, Ln2, Attn and MLP are required (Forward refuses a nil one); a nil
// Drop is no dropout.
type Block struct {
	Ln1, Ln2 *LayerNorm
	Attn     *CausalSelfAttention
	MLP      *MLP
	Drop     *Dropout
}

// MLP is the block's feed-forward part: c_proj(GELU(c_fc(x))), widening
// to 4x the width and back.
type MLP struct {
	FC, Proj *Linear // mlp.c_fc, mlp.c_proj
	// KeepGelu keeps the GELU output for backward instead of recomputing
	// it there (autograd.GeluLinearKept): faster, one activation of the
	// hidden layer's size more per block. A GPT keeps it in its blocks
	// whenever nothing is checkpointed (CheckpointNone keeps every
	// activation), whatever this says; set it to keep it elsewhere too.
	KeepGelu bool
}

// NewMLP makes an MLP of width dim with GPT-2 initialisation (projStd for
// the output projection). A dim that is not positive, or whose hidden
// width 4*dim overflows int, is an error wrapping tensor.ErrArgument;
// other errors as NewLinear.
func NewMLP(o Options, name string, dim int, projStd float64) (*MLP, error) {
	if err := positive("NewMLP", name, "dim", dim); err != nil {
		return nil, err
	}
	if dim > math.MaxInt/4 {
		return nil, argError("NewMLP", name, "dim = %d: the hidden width 4*dim overflows int", dim)
	}
	fc, err := NewLinear(o, prefix(name, "c_fc"), dim, 4*dim, true, 0.02)
	if err != nil {
		return nil, err
	}
	proj, err := NewLinear(o, prefix(name, "c_proj"), 4*dim, dim, true, projStd)
	if err != nil {
		Release(fc.Parameters())
		return nil, err
	}
	return &MLP{FC: fc, Proj: proj}, nil
}

// Forward maps x (..., dim) to (..., dim). Unless KeepGelu is set, the
// GELU output is not kept for backward but recomputed there
// (autograd.GeluLinear). Under autocast the hidden layer's product is made
// in the half type (Linear.ForwardHalf), as PyTorch's autocast makes it:
// the GELU reads it widened and GeluLinear keeps it for backward at half
// the bytes of float32.
func (m *MLP) Forward(x *autograd.Var) *autograd.Var { return m.forward(x, false) }

// forward is Forward keeping the GELU output when keep (or KeepGelu) is
// set. The model is read, never written, so goroutines may share it.
func (m *MLP) forward(x *autograd.Var, keep bool) *autograd.Var {
	needModule("nn.MLP", "MLP", m == nil)
	keep = keep || m.KeepGelu
	u := m.FC.ForwardHalf(x)
	if keep {
		return autograd.GeluLinearKept(u, m.Proj.weight(), m.Proj.bias())
	}
	return autograd.GeluLinear(u, m.Proj.weight(), m.Proj.bias())
}

// Parameters returns c_fc's and c_proj's.
func (m *MLP) Parameters() []*Parameter { return Collect(m.FC, m.Proj) }

// CausalSelfAttention projects to q, k, v with one (3C, C) weight
// (attn.c_attn), attends causally per head and projects back (attn.c_proj).
// A nil AttnDrop or ResidDrop is no dropout there.
type CausalSelfAttention struct {
	CAttn, CProj *Linear
	Heads        int
	AttnDrop     *Dropout
	ResidDrop    *Dropout
	// Attention is plain (the default) or fused; GPT.SetAttention sets
	// every block's.
	Attention Attention
}

// NewGPT builds a GPT with GPT-2 initialisation: normal(0, 0.02) weights,
// residual projections (c_proj) scaled by 1/√(2·layers), zero biases,
// LayerNorms at 1 and 0. It returns the config's error (GPTConfig.Validate),
// a bad option's (a half-precision dtype among them: the model's
// arithmetic is float32 or float64, so keep float32 parameters and run
// its products in bfloat16 or float16 under amp.Autocast), or the memory
// error; nothing stays allocated then.
func NewGPT(c GPTConfig, o Options) (*GPT, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	o, err := o.resolve("NewGPT", "")
	if err == nil {
		err = o.fullPrecision("NewGPT", "")
	}
	if err != nil {
		return nil, err
	}
	var made []Module // to release on failure
	keep := func(m Module) { made = append(made, m) }
	var g *GPT
	err = build(func() {
		projStd := 0.02 / math.Sqrt(2*float64(c.Layers))
		seed := o.Rng.Uint64()
		drop := func(i uint64) *Dropout { return &Dropout{P: c.Dropout, Seed: seed + i, Training: true} }
		lin := func(name string, in, out int, std float64) *Linear {
			l := must(NewLinear(o, name, in, out, true, std))
			keep(l)
			return l
		}
		emb := func(name string, num int) *Embedding {
			e := must(NewEmbedding(o, name, num, c.Width, 0.02))
			keep(e)
			return e
		}
		ln := func(name string) *LayerNorm {
			l := must(NewLayerNorm(o, name, c.Width))
			keep(l)
			return l
		}
		g = &GPT{
			Config: c,
			Wte:    emb("transformer.wte", c.Vocab),
			Wpe:    emb("transformer.wpe", c.Context),
			Drop:   drop(0),
		}
		for i := range c.Layers {
			p := fmt.Sprintf("transformer.h.%d", i)
			b := &Block{Ln1: ln(p + ".ln_1")}
			b.Attn = &CausalSelfAttention{
				CAttn:     lin(p+".attn.c_attn", c.Width, 3*c.Width, 0.02),
				CProj:     lin(p+".attn.c_proj", c.Width, c.Width, projStd),
				Heads:     c.Heads,
				AttnDrop:  drop(uint64(3*i + 1)),
				ResidDrop: drop(uint64(3*i + 2)),
			}
			b.Ln2 = ln(p + ".ln_2")
			b.MLP = must(NewMLP(o, p+".mlp", c.Width, projStd))
			keep(b.MLP)
			b.Drop = drop(uint64(3*i + 3))
			g.Blocks = append(g.Blocks, b)
		}
		g.LnF = ln("transformer.ln_f")
	})
	if err != nil {
		for _, m := range made {
			Release(m.Parameters())
		}
		return nil, err
	}
	return g, nil
}

// Parameters returns every parameter once (the head is the token table).
func (g *GPT) Parameters() []*Parameter {
	ps := Collect(g.Wte, g.Wpe)
	for _, b := range g.Blocks {
		ps = append(ps, Collect(b.Ln1, b.Attn.CAttn, b.Attn.CProj, b.Ln2, b.MLP)...)
	}
	return append(ps, g.LnF.Parameters()...)
}

// SetBlockGradDType keeps the gradients of the blocks' matrix weights
// (attention's c_attn and c_proj, the MLP's c_fc and c_proj: 85% of
// gpt2-medium's parameters) in dt, bfloat16 or float16 (autograd's
// Var.SetGradDType), or back in float32. Each of them gets one gradient a
// backward pass, rounded once; the token table (two gradients: the head's
// and the embedding's), the positions, the norms and the biases keep
// float32 ones. Under bf16 autocast this halves the gradients' memory at
// the step's peak, the end of the backward pass, as llm.c's bf16
// gradients do; AdamW widens them as it reads them (SGD widens a copy of
// one at a time). Call it with no gradients held.
func (g *GPT) SetBlockGradDType(dt tensor.DType) error {
	for _, b := range g.Blocks {
		for _, l := range []*Linear{b.Attn.CAttn, b.Attn.CProj, b.MLP.FC, b.MLP.Proj} {
			if err := l.Weight.SetGradDType(dt); err != nil {
				return fmt.Errorf("nn: %s: %w", l.Weight.Name, err)
			}
		}
	}
	return nil
}

// SetTraining turns dropout on or off. A nil *Dropout (no dropout) is
// skipped.
func (g *GPT) SetTraining(on bool) {
	set := func(d *Dropout) {
		if d != nil {
			d.Training = on
		}
	}
	set(g.Drop)
	for _, b := range g.Blocks {
		set(b.Drop)
		set(b.Attn.AttnDrop)
		set(b.Attn.ResidDrop)
	}
}

// Forward maps int32 token ids (B, T), T <= Context, to logits (B, T, V).
// The pass runs in the ids' context (its scope, autocast region and grad
// mode): ids that belong to none (a kept tensor) are refused; adopt a view
// of them (c.Adopt(ids.Alias())). Panics with a *tensor.OpError on bad
// input (wrap in tensor.Try).
func (g *GPT) Forward(idx *tensor.Tensor) *autograd.Var {
	g.check()
	return g.head(g.trunk(idx))
}

// Trunk maps token ids (B, T) to the final normalised hidden states
// (B, T, C), before the output head.
func (g *GPT) Trunk(idx *tensor.Tensor) *autograd.Var {
	g.check()
	return g.trunk(idx)
}

// The exported passes (Forward, Trunk, Head, Loss) check the model and
// run these, which do not, so that one pass checks it once: Loss, which
// runs both, checked it three times a step through Trunk and Head.

// trunk is Trunk on a checked g.
func (g *GPT) trunk(idx *tensor.Tensor) *autograd.Var {
	if idx == nil {
		panic(&tensor.OpError{Op: "nn.GPT.Forward", Msg: "ids are nil: want int32 (B, T)", Err: tensor.ErrArgument})
	}
	if idx.Rank() != 2 || idx.DType() != tensor.Int32 {
		kind := tensor.ErrShape
		if idx.DType() != tensor.Int32 {
			kind = tensor.ErrDType
		}
		panic(&tensor.OpError{Op: "nn.GPT.Forward", Msg: fmt.Sprintf("ids %v %v: want int32 (B, T)", idx.DType(), idx.Shape()), Err: kind})
	}
	if err := g.Checkpoint.Validate(); err != nil {
		panic(&tensor.OpError{Op: "nn.GPT.Forward", Msg: err.Error(), Err: tensor.ErrArgument})
	}
	T := idx.Dim(1)
	if T > g.Config.Context {
		panic(&tensor.OpError{Op: "nn.GPT.Forward", Msg: fmt.Sprintf("sequence length %d exceeds the context %d", T, g.Config.Context), Err: tensor.ErrShape})
	}
	c := idx.Ctx()
	if c == nil {
		// Every op of the pass takes its context from its operands: with
		// kept ids and parameters only, none would be the caller's, so
		// its scope, autocast region and grad mode would not apply and
		// what the pass makes would belong to no scope.
		panic(&tensor.OpError{Op: "nn.GPT.Forward", Msg: "ids belong to no context (a kept tensor, tensor.NewKept): pass c.Adopt(ids.Alias()) for the context c the pass runs in", Err: tensor.ErrArgument})
	}
	// Positions 0..T-1 are the first T rows of Wpe: a view, not a gather
	// of ids uploaded every step (Narrow's backward writes the same rows).
	// The slice is made from a parameter alone, so it belongs to no
	// context until Add meets the ids' embeddings; the ids' context owns
	// it from now, so that a failure before Add (an id past the
	// vocabulary) leaves it to their scope, not to the GC (the Decoder
	// does the same).
	pos := autograd.Narrow(g.Wpe.Weight.Var, 0, 0, T)
	c.Adopt(pos.Value)
	x := autograd.Add(g.Wte.Forward(idx), pos) // (B, T, C) + (T, C)
	x = g.Drop.Forward(x)
	x = g.blocks(x) // checkpointed as g.Checkpoint says
	return g.LnF.Forward(x)
}

// Head applies the tied output projection: logits = h Wteᵀ.
func (g *GPT) Head(h *autograd.Var) *autograd.Var {
	g.check()
	return g.head(h)
}

// head is Head on a checked g.
func (g *GPT) head(h *autograd.Var) *autograd.Var {
	return autograd.Linear(h, g.Wte.Weight.Var, nil)
}

// check refuses a nil model, or one without a part every pass reads (a
// GPT literal missing a field; NewGPT makes them all), with an
// *tensor.OpError wrapping tensor.ErrArgument that names it, where
// reading it was a nil-pointer panic that tensor.Try passes on (as
// Block.check does for a block's sublayers).
func (g *GPT) check() {
	missing := ""
	switch {
	case g == nil:
		missing = "the model"
	case g.Wte == nil || g.Wte.Weight == nil || g.Wte.Weight.Var == nil:
		missing = "Wte"
	case g.Wpe == nil || g.Wpe.Weight == nil || g.Wpe.Weight.Var == nil:
		missing = "Wpe"
	case g.LnF == nil:
		missing = "LnF"
	default:
		return
	}
	panic(&tensor.OpError{Op: "nn.GPT", Msg: missing + " is nil: a GPT needs Wte, Wpe and LnF with their weights (NewGPT makes them; a nil Drop is no dropout)", Err: tensor.ErrArgument})
}

// Loss is the mean next-token cross-entropy of the logits for idx against
// targets (both int32 (B, T)). An empty batch (B or T 0), whose mean is
// undefined (NaN in PyTorch), panics with a *tensor.OpError wrapping
// tensor.ErrShape, as targets of another shape than idx do (with either
// HeadLoss), and nil targets with tensor.ErrArgument.
func (g *GPT) Loss(idx, targets *tensor.Tensor) *autograd.Var {
	g.check()
	if targets == nil {
		panic(&tensor.OpError{Op: "nn.GPT.Loss", Msg: "targets are nil: want int32 (B, T)", Err: tensor.ErrArgument})
	}
	if idx != nil && idx.Numel() == 0 {
		panic(&tensor.OpError{Op: "nn.GPT.Loss", Msg: fmt.Sprintf("empty batch: ids %v: the mean loss of no tokens is undefined", idx.Shape()), Err: tensor.ErrShape})
	}
	if idx != nil && !slices.Equal(targets.Shape(), idx.Shape()) {
		panic(&tensor.OpError{Op: "nn.GPT.Loss", Msg: fmt.Sprintf("targets %v for ids %v: want the ids' shape", targets.Shape(), idx.Shape()), Err: tensor.ErrShape})
	}
	if g.HeadLoss.Fused {
		return g.HeadLoss.loss(g.trunk(idx), g.Wte.Weight.Var, targets)
	}
	return CrossEntropy(g.head(g.trunk(idx)), targets)
}

// Forward applies the block to x (B, T, C). It panics with an
// *tensor.OpError wrapping tensor.ErrArgument that names the field when
// Ln1, Ln2, Attn or MLP is nil (tensor.Try returns it).
func (b *Block) Forward(x *autograd.Var) *autograd.Var { return b.forward(x, false) }

// forward is Forward, the MLP keeping its GELU output when keepGelu (or
// the MLP's own KeepGelu) is set.
func (b *Block) forward(x *autograd.Var, keepGelu bool) *autograd.Var {
	b.check()
	// Each norm feeds only products (the q/k/v and MLP projections): under
	// autocast its output is made in the half type they multiply in.
	x = autograd.Add(x, b.Attn.Forward(b.Ln1.ForwardToProducts(x)))
	h := b.MLP.forward(b.Ln2.ForwardToProducts(x), keepGelu)
	return autograd.Add(x, b.Drop.Forward(h))
}

// check refuses a nil block, or one without a sublayer it needs: a
// nanoGPT block always has both norms, the attention and the MLP, so a
// nil one is a field left out of a literal, not "no norm".
func (b *Block) check() {
	missing := ""
	switch {
	case b == nil:
		missing = "the block"
	case b.Ln1 == nil:
		missing = "Ln1"
	case b.Ln2 == nil:
		missing = "Ln2"
	case b.Attn == nil:
		missing = "Attn"
	case b.MLP == nil:
		missing = "MLP"
	default:
		return
	}
	panic(&tensor.OpError{Op: "nn.Block", Msg: missing + " is nil: a block needs Ln1, Ln2, Attn and MLP (a nil Drop is no dropout)", Err: tensor.ErrArgument})
}

// checkHeads refuses a head count that is not positive or does not divide
// width: the attention splits the width into heads of equal size.
func checkHeads(heads, width int) error {
	if heads <= 0 || width%heads != 0 {
		return fmt.Errorf("%d heads for width %d: want a positive number of heads dividing the width", heads, width)
	}
	return nil
}

// Forward attends over x (B, T, C). It panics with an *tensor.OpError
// wrapping tensor.ErrShape when x is not 3-D or Heads does not divide C,
// and one wrapping tensor.ErrArgument when x is nil or Attention is
// neither plain nor fused.
func (a *CausalSelfAttention) Forward(x *autograd.Var) *autograd.Var {
	needModule("nn.CausalSelfAttention", "CausalSelfAttention", a == nil)
	needVar("nn.CausalSelfAttention", "x", x)
	if a.Attention != AttentionPlain && a.Attention != AttentionFused {
		panic(&tensor.OpError{Op: "nn.CausalSelfAttention", Msg: fmt.Sprintf("attention %v: want AttentionPlain or AttentionFused", a.Attention), Err: tensor.ErrArgument})
	}
	s := x.Value.Shape()
	if len(s) != 3 {
		panic(&tensor.OpError{Op: "nn.CausalSelfAttention", Msg: fmt.Sprintf("input %v: want (B, T, C)", s), Err: tensor.ErrShape})
	}
	B, T, C := s[0], s[1], s[2]
	H := a.Heads
	if err := checkHeads(H, C); err != nil {
		panic(&tensor.OpError{Op: "nn.CausalSelfAttention", Msg: err.Error(), Err: tensor.ErrShape})
	}
	if a.Attention == AttentionFused {
		// The heads of qkv in place, y (B, T, C) with its heads side by
		// side: no split or merge copies. The op takes qkv in the
		// autocast dtype, so under autocast the product is made in it
		// (ForwardHalf); the op keeps what its backward needs, so qkv
		// goes now.
		qkv := a.CAttn.ForwardHalf(x)                           // (B, T, 3C)
		p, seed, off := a.AttnDrop.next(x.Value.Ctx(), B*H*T*T) // the attention probabilities
		y := autograd.FusedCausalAttentionQKV(qkv, H, p, seed, off)
		qkv.Drop()
		return a.ResidDrop.Forward(a.CProj.Forward(y))
	}
	qkv := a.CAttn.Forward(x)                      // (B, T, 3C)
	qkv5 := autograd.Reshape(qkv, B, T, 3, H, C/H) // (B, T, 3, H, hd)
	perm := autograd.Permute(qkv5, 2, 0, 3, 1, 4)  // (3, B, H, T, hd), a view
	heads := autograd.Contiguous(perm)
	dropAll(qkv, qkv5, perm) // no backward reads them: free qkv now
	q := autograd.Reshape(autograd.Narrow(heads, 0, 0, 1), B, H, T, C/H)
	k := autograd.Reshape(autograd.Narrow(heads, 0, 1, 1), B, H, T, C/H)
	v := autograd.Reshape(autograd.Narrow(heads, 0, 2, 1), B, H, T, C/H)
	p, seed, off := a.AttnDrop.next(x.Value.Ctx(), B*H*T*T) // the attention probabilities
	y := autograd.CausalAttention(q, k, v, p, seed, off)    // (B, H, T, hd)
	yp := autograd.Permute(y, 0, 2, 1, 3)                   // (B, T, H, hd), a view
	yc := autograd.Contiguous(yp)
	dropAll(y, yp)
	y = autograd.Reshape(yc, B, T, C)
	return a.ResidDrop.Forward(a.CProj.Forward(y))
}

// dropAll frees the values of intermediates that no backward reads.
func dropAll(vs ...*autograd.Var) {
	for _, v := range vs {
		v.Drop()
	}
}
