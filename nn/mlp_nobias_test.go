package nn_test

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/nn"
	"github.com/strata-ml/strata/tensor"
)

// TestMLPWithoutBias: an MLP of bias-less Linears (nanoGPT's bias=False)
// is c_proj(GELU(c_fc(x))) like any other, kept or recomputed GELU; the
// fused GELU and projection takes no bias then instead of reading a nil
// parameter.
func TestMLPWithoutBias(t *testing.T) {
	o := nn.Options{DType: tensor.Float64, Rng: rand.New(rand.NewPCG(3, 4))}
	fc := nn.Must(nn.NewLinear(o, "c_fc", 4, 16, false, 0.02))
	proj := nn.Must(nn.NewLinear(o, "c_proj", 16, 4, false, 0.02))
	defer nn.Release(nn.Collect(fc, proj))
	for _, keep := range []bool{false, true} {
		m := &nn.MLP{FC: fc, Proj: proj, KeepGelu: keep}
		tensor.WithScope(func() {
			c := tensor.Background()
			x := autograd.Const(c.RandN(tensor.CPU(), tensor.Float64, rand.New(rand.NewPCG(5, 6)), 1, 2, 3, 4))
			var got *autograd.Var
			require.NoError(t, tensor.Try(func() { got = m.Forward(x) }), "KeepGelu %v", keep)
			want := proj.Forward(nn.GELU(fc.Forward(x)))
			require.InDeltaSlice(t, want.Value.Float64s(), got.Value.Float64s(), 1e-12)
		})
	}
}
