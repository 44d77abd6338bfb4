package nn

import (
	"errors"
	"fmt"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/tensor"
)

// Decoder runs a GPT forward a few positions at a time for generation,
// keeping every layer's attention keys and values of the positions seen
// so far (a KV cache): feeding one more token costs one position of each
// block (its projections and MLP) and one row of attention against the
// cached keys, instead of the whole sequence again.
//
// The cache is preallocated to the model's context: per layer a key and a
// value tensor of (1, heads, context, head width) on the parameters'
// device and in their dtype, 2·layers·context·width elements in all
// (memory role activation). The heads are each block's attention layer's
// (CausalSelfAttention.Heads, which its Forward splits by) as NewDecoder
// finds them; the cache's shape is then the one place Feed reads them. A Decoder holds one sequence (batch 1).
// It reads the GPT's parameters and never writes them; it computes the
// eval-mode forward (no dropout, whatever the GPT's training flag) with
// plain attention, under no-grad. Many Decoders, each with its own Ctx,
// may read one GPT from several goroutines. Release frees the cache.
type Decoder struct {
	g    *GPT
	c    *tensor.Ctx
	k, v []*tensor.Tensor // per layer, (1, H, Context, hd)
	n    int              // positions cached
}

// NewDecoder allocates a KV cache for g. Its computations run in c (a new
// Ctx when nil): their intermediates are freed after every Feed.
func (g *GPT) NewDecoder(c *tensor.Ctx) (*Decoder, error) {
	if c == nil {
		c = tensor.NewCtx()
	}
	cfg := g.Config
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if len(g.Blocks) != cfg.Layers {
		return nil, fmt.Errorf("nn: decoder: the GPT has %d blocks, its config says %d layers", len(g.Blocks), cfg.Layers)
	}
	for i, b := range g.Blocks {
		if err := checkHeads(b.Attn.Heads, cfg.Width); err != nil {
			return nil, fmt.Errorf("nn: decoder: block %d: %w", i, err)
		}
	}
	d := &Decoder{g: g, c: c}
	w := g.Wte.Weight.Value
	for _, b := range g.Blocks {
		H := b.Attn.Heads
		for _, kv := range []*[]*tensor.Tensor{&d.k, &d.v} {
			t, err := tensor.NewKept(w.Device(), w.DType(), memory.RoleActivation, 1, H, cfg.Context, cfg.Width/H)
			if err != nil {
				d.Release()
				return nil, fmt.Errorf("nn: decoder: allocating the KV cache: %w", err)
			}
			*kv = append(*kv, t)
		}
	}
	return d, nil
}

// Len is the number of positions in the cache.
func (d *Decoder) Len() int { return d.n }

// Reset empties the cache (its memory is kept for the next sequence).
func (d *Decoder) Reset() { d.n = 0 }

// Release frees the cache; the Decoder cannot be used after.
func (d *Decoder) Release() {
	for _, t := range append(d.k, d.v...) {
		t.Release()
	}
	d.k, d.v, d.n = nil, nil, 0
}

// ErrContextFull is returned by Feed when the tokens would not fit in the
// model's context.
var ErrContextFull = errors.New("the model's context is full")

// Feed runs the tokens at positions Len() to Len()+len(tokens)-1 (a
// prompt at once, then one token at a time), appends their keys and
// values to the cache and returns the logits (vocabulary size) of the
// last token, on the host: the only copy from the device per call. Errors:
// no tokens, a token outside the vocabulary, or more positions than the
// context (ErrContextFull: Reset and feed a shorter window, as Generate
// does).
func (d *Decoder) Feed(tokens []int) ([]float32, error) {
	if d.k == nil {
		return nil, errors.New("nn: decoder: used after Release")
	}
	cfg := d.g.Config
	if len(tokens) == 0 {
		return nil, errors.New("nn: decoder: no tokens to feed")
	}
	if d.n+len(tokens) > cfg.Context {
		return nil, fmt.Errorf("nn: decoder: %d cached positions and %d new tokens exceed the context of %d: %w", d.n, len(tokens), cfg.Context, ErrContextFull)
	}
	ids := make([]int32, len(tokens))
	for i, t := range tokens {
		if t < 0 || t >= cfg.Vocab {
			return nil, fmt.Errorf("nn: decoder: token %d (at %d) is outside the vocabulary [0, %d)", t, i, cfg.Vocab)
		}
		ids[i] = int32(t)
	}
	var logits []float32
	err := tensor.Try(func() {
		autograd.NoGradIn(d.c, func() {
			d.c.WithScope(func() { logits = d.forward(ids) })
		})
	})
	if err != nil {
		return nil, fmt.Errorf("nn: decoder: %w", err)
	}
	d.n += len(tokens)
	return logits, nil
}

// forward is the GPT's eval-mode forward of positions d.n.. for ids,
// writing their keys and values into the cache; the logits are those of
// the last position.
func (d *Decoder) forward(ids []int32) []float32 {
	g, c := d.g, d.c
	T := len(ids)
	dev := g.Wte.Weight.Value.Device()
	var idx *tensor.Tensor
	c.WithRole(memory.RoleStaging, func() { idx = c.FromInt32s(dev, ids, 1, T) })
	pos := autograd.Narrow(g.Wpe.Weight.Var, 0, d.n, T)
	c.Adopt(pos.Value)
	x := autograd.Add(g.Wte.Forward(idx), pos) // (1, T, C)
	for i, b := range g.Blocks {
		b.check() // as Block.Forward: a nil sublayer is an OpError naming it
		x = autograd.Add(x, d.attend(i, b.Attn, b.Ln1.Forward(x)))
		x = autograd.Add(x, b.MLP.Forward(b.Ln2.Forward(x)))
	}
	last := autograd.Narrow(x, 1, T-1, 1) // (1, 1, C): only the last position's logits
	return g.Head(g.LnF.Forward(last)).Value.Float32s()
}

// attend is block i's attention for x (1, T, C) at positions d.n..d.n+T-1
// against every cached position, as CausalSelfAttention.Forward computes
// it for the whole sequence; the heads are the cache's.
func (d *Decoder) attend(i int, a *CausalSelfAttention, x *autograd.Var) *autograd.Var {
	c := d.c
	T, C := x.Value.Dim(1), x.Value.Dim(2)
	H, hd := d.k[i].Dim(1), d.k[i].Dim(3)
	qkv := a.CAttn.Forward(x).Value // (1, T, 3C)
	heads := qkv.Reshape(1, T, 3, H, hd).Permute(2, 0, 3, 1, 4).Contiguous()
	part := func(j int) *tensor.Tensor { return heads.Narrow(0, j, 1).Reshape(1, H, T, hd) }
	q := part(0)
	d.k[i].WriteNarrow(2, d.n, part(1))
	d.v[i].WriteNarrow(2, d.n, part(2))
	L := d.n + T
	kc, vc := d.k[i].Narrow(2, 0, L), d.v[i].Narrow(2, 0, L) // views of the cache
	c.Adopt(kc)
	c.Adopt(vc)
	// q (1, H, T, hd) against L keys: CausalSoftmax masks key j > query
	// i + L - T, the causal mask of the last T rows of the full sequence.
	y := autograd.CausalAttention(autograd.Const(q), autograd.Const(kc), autograd.Const(vc), 0, 0, 0).Value
	y = y.Permute(0, 2, 1, 3).Contiguous().Reshape(1, T, C)
	return a.CProj.Forward(autograd.Const(y))
}
