package nn_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/nn"
	"github.com/strata-ml/strata/tensor"
)

// TestNilModelPartsAreOpErrors: a nil *LayerNorm, *RMSNorm, *MLP,
// *CausalSelfAttention, *Sequential or *GPT and a GPT literal missing
// Wte, Wpe or LnF are *tensor.OpErrors wrapping
// ErrArgument that name what is missing, as a nil *Linear, *Embedding and
// a block's missing sublayer are; they were nil-pointer panics that
// tensor.Try passes on.
func TestNilModelPartsAreOpErrors(t *testing.T) {
	g := nn.Must(nn.NewGPT(nn.GPTConfig{Vocab: 16, Context: 8, Layers: 1, Heads: 2, Width: 8}, nn.Options{}))
	defer nn.Release(g.Parameters())
	x := func() *autograd.Var { return autograd.Const(tensor.Ones(tensor.CPU(), tensor.Float32, 2, 8)) }
	ids := func() *tensor.Tensor { return tensor.FromInt32s(tensor.CPU(), []int32{1, 2, 3}, 1, 3) }
	without := func(f func(*nn.GPT)) *nn.GPT {
		h := &nn.GPT{Config: g.Config, Wte: g.Wte, Wpe: g.Wpe, Blocks: g.Blocks, LnF: g.LnF}
		f(h)
		return h
	}
	var none *nn.LayerNorm
	var nilGPT *nn.GPT
	var (
		rms  *nn.RMSNorm
		mlp  *nn.MLP
		attn *nn.CausalSelfAttention
		seq  *nn.Sequential
	)
	for name, c := range map[string]struct {
		f    func()
		want string
	}{
		"LayerNorm":                   {func() { none.Forward(x()) }, "nil *LayerNorm"},
		"LayerNorm ForwardToProducts": {func() { none.ForwardToProducts(x()) }, "nil *LayerNorm"},
		"RMSNorm":                     {func() { rms.Forward(x()) }, "nil *RMSNorm"},
		"MLP":                         {func() { mlp.Forward(x()) }, "nil *MLP"},
		"CausalSelfAttention":         {func() { attn.Forward(x()) }, "nil *CausalSelfAttention"},
		"Sequential":                  {func() { seq.Forward(x()) }, "nil *Sequential"},
		"GPT Forward":                 {func() { nilGPT.Forward(ids()) }, "the model is nil"},
		"GPT Head":                    {func() { nilGPT.Head(x()) }, "the model is nil"},
		"GPT Loss":                    {func() { nilGPT.Loss(ids(), ids()) }, "the model is nil"},
		"no Wte":                      {func() { without(func(h *nn.GPT) { h.Wte = nil }).Forward(ids()) }, "Wte is nil"},
		"no Wpe":                      {func() { without(func(h *nn.GPT) { h.Wpe = nil }).Forward(ids()) }, "Wpe is nil"},
		"no LnF":                      {func() { without(func(h *nn.GPT) { h.LnF = nil }).Forward(ids()) }, "LnF is nil"},
	} {
		t.Run(name, func(t *testing.T) {
			var err error
			require.NotPanics(t, func() { err = tensor.Try(func() { tensor.WithScope(c.f) }) })
			require.ErrorIs(t, err, tensor.ErrArgument)
			require.ErrorContains(t, err, c.want)
		})
	}
	// The whole model still runs.
	tensor.WithScope(func() {
		require.Equal(t, []int{1, 3, 16}, g.Forward(tensor.Background().Adopt(ids())).Value.Shape())
	})
}

// TestGPTPassesCheckTheModel: each exported pass of a GPT (Forward,
// Trunk, Head, Loss with either head and loss) refuses a nil model and
// one missing Wte, Wpe or LnF with an *tensor.OpError wrapping
// ErrArgument that names it, each on its own: Loss and Forward run
// unchecked trunk and head, whose checks they make once for both.
func TestGPTPassesCheckTheModel(t *testing.T) {
	g := nn.Must(nn.NewGPT(nn.GPTConfig{Vocab: 16, Context: 8, Layers: 1, Heads: 2, Width: 8}, nn.Options{}))
	defer nn.Release(g.Parameters())
	ids := func() *tensor.Tensor {
		return tensor.Background().Adopt(tensor.FromInt32s(tensor.CPU(), []int32{1, 2, 3}, 1, 3))
	}
	h := func() *autograd.Var { return autograd.Const(tensor.Ones(tensor.CPU(), tensor.Float32, 1, 3, 8)) }
	models := map[string]func() *nn.GPT{
		"the model is nil": func() *nn.GPT { return nil },
		"Wte is nil":       func() *nn.GPT { return &nn.GPT{Config: g.Config, Wpe: g.Wpe, Blocks: g.Blocks, LnF: g.LnF} },
		"Wpe is nil":       func() *nn.GPT { return &nn.GPT{Config: g.Config, Wte: g.Wte, Blocks: g.Blocks, LnF: g.LnF} },
		"LnF is nil":       func() *nn.GPT { return &nn.GPT{Config: g.Config, Wte: g.Wte, Wpe: g.Wpe, Blocks: g.Blocks} },
	}
	passes := map[string]func(m *nn.GPT){
		"Forward": func(m *nn.GPT) { m.Forward(ids()) },
		"Trunk":   func(m *nn.GPT) { m.Trunk(ids()) },
		"Head":    func(m *nn.GPT) { m.Head(h()) },
		"Loss":    func(m *nn.GPT) { m.Loss(ids(), ids()) },
		"Loss fused": func(m *nn.GPT) {
			if m != nil {
				defer func(hl nn.HeadLoss) { m.HeadLoss = hl }(m.HeadLoss)
				m.HeadLoss = nn.HeadLoss{Fused: true}
			}
			m.Loss(ids(), ids())
		},
	}
	for want, model := range models {
		for name, pass := range passes {
			t.Run(name+"/"+want, func(t *testing.T) {
				var err error
				require.NotPanics(t, func() { err = tensor.Try(func() { tensor.WithScope(func() { pass(model()) }) }) })
				require.ErrorIs(t, err, tensor.ErrArgument)
				require.ErrorContains(t, err, want)
			})
		}
	}
	// Every pass runs on the whole model.
	for name, pass := range passes {
		require.NoError(t, tensor.Try(func() { tensor.WithScope(func() { pass(g) }) }), name)
	}
}

// TestAutoAttentionNilDevice: a nil device is the CPU (plain attention),
// as Options takes it; it was a nil dereference.
func TestAutoAttentionNilDevice(t *testing.T) {
	require.Equal(t, nn.AttentionPlain, nn.AutoAttention(nil, true, 64))
}
