package nn_test

// Misuse of the public API that once went wrong silently or with a runtime
// panic instead of an *OpError or error naming the problem.

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/nn"
	"github.com/strata-ml/strata/tensor"
)

// TestGPTConfigErrors: NewGPT's config errors wrap tensor.ErrArgument, as
// every constructor's do, and a NaN dropout is one of them (it used to
// pass Validate and fail every training forward pass instead).
func TestGPTConfigErrors(t *testing.T) {
	ok := nn.GPTConfig{Vocab: 16, Context: 8, Layers: 1, Heads: 2, Width: 8}
	for name, mod := range map[string]func(c *nn.GPTConfig){
		"vocab 0":      func(c *nn.GPTConfig) { c.Vocab = 0 },
		"heads 3":      func(c *nn.GPTConfig) { c.Heads = 3 },
		"dropout 1":    func(c *nn.GPTConfig) { c.Dropout = 1 },
		"dropout -0.1": func(c *nn.GPTConfig) { c.Dropout = -0.1 },
		"dropout NaN":  func(c *nn.GPTConfig) { c.Dropout = math.NaN() },
	} {
		c := ok
		mod(&c)
		require.ErrorIs(t, c.Validate(), tensor.ErrArgument, name)
		g, err := nn.NewGPT(c, nn.Options{})
		if err == nil {
			nn.Release(g.Parameters())
		}
		require.ErrorIs(t, err, tensor.ErrArgument, name)
	}
	require.NoError(t, ok.Validate())
}

// TestForwardShapeMistakesAreOpErrors: a scalar to CrossEntropy, targets
// that are not the logits' leading shape, and a 2-D input to the
// attention are *tensor.OpError panics wrapping ErrShape
// (tensor.Try returns them), not runtime index panics.
func TestForwardShapeMistakesAreOpErrors(t *testing.T) {
	g, err := nn.NewGPT(nn.GPTConfig{Vocab: 16, Context: 8, Layers: 1, Heads: 2, Width: 8}, nn.Options{})
	require.NoError(t, err)
	defer nn.Release(g.Parameters())
	tensor.WithScope(func() {
		dev := tensor.CPU()
		x2 := autograd.Const(tensor.Zeros(dev, tensor.Float32, 4, 8))
		for name, f := range map[string]func(){
			"CrossEntropy scalar": func() {
				nn.CrossEntropy(autograd.Const(tensor.Scalar(dev, tensor.Float32, 1)), tensor.FromInt32s(dev, []int32{0}))
			},
			"CrossEntropy targets of another shape": func() { // as many elements, another shape
				logits := autograd.Const(tensor.Zeros(dev, tensor.Float32, 2, 3, 16))
				nn.CrossEntropy(logits, tensor.Zeros(dev, tensor.Int32, 3, 2))
			},
			"CrossEntropy flat targets": func() {
				logits := autograd.Const(tensor.Zeros(dev, tensor.Float32, 2, 3, 16))
				nn.CrossEntropy(logits, tensor.Zeros(dev, tensor.Int32, 6))
			},
			"attention 2-D": func() { g.Blocks[0].Attn.Forward(x2) },
			"block 2-D":     func() { g.Blocks[0].Forward(x2) },
		} {
			var err error
			require.NotPanics(t, func() { err = tensor.Try(f) }, name)
			require.ErrorIs(t, err, tensor.ErrShape, name)
		}
	})
}

// TestOptimizerLiterals: an AdamW or SGD written as a struct literal (its
// fields are exported) steps like the constructors' instead of panicking
// on its nil state maps.
func TestOptimizerLiterals(t *testing.T) {
	for name, mk := range map[string]func(ps []*nn.Parameter) nn.Optimizer{
		"AdamW": func(ps []*nn.Parameter) nn.Optimizer {
			return &nn.AdamW{Params: ps, LR: 0.1, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8}
		},
		"SGD": func(ps []*nn.Parameter) nn.Optimizer { return &nn.SGD{Params: ps, LR: 0.1, Momentum: 0.9} },
	} {
		l := nn.Must(nn.NewLinear(nn.Options{}, "l", 1, 1, false, 0))
		before := l.Weight.Value.Float32s()[0]
		opt := mk(l.Parameters())
		var err error
		require.NotPanics(t, func() {
			_, err = nn.TrainStep(nil, l.Parameters(), opt, func() *autograd.Var {
				x := autograd.Const(tensor.Ones(tensor.CPU(), tensor.Float32, 1, 1))
				return autograd.Sum(l.Forward(x), false)
			})
		}, name)
		require.NoError(t, err, name)
		require.Less(t, l.Weight.Value.Float32s()[0], before, name)
		opt.Release()
		nn.Release(l.Parameters())
	}
}

// TestInitStdMustBeFinite: NewLinear and NewEmbedding refuse an infinite
// standard deviation (it made Inf and NaN weights), as they refuse a
// negative or NaN one.
func TestInitStdMustBeFinite(t *testing.T) {
	for _, std := range []float64{math.Inf(1), math.NaN(), -1} {
		_, err := nn.NewLinear(nn.Options{}, "l", 2, 2, true, std)
		require.ErrorIs(t, err, tensor.ErrArgument, "Linear std %v", std)
		_, err = nn.NewEmbedding(nn.Options{}, "e", 2, 2, std)
		require.ErrorIs(t, err, tensor.ErrArgument, "Embedding std %v", std)
	}
}
