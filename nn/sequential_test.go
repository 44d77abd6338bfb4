package nn_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/nn"
	"github.com/strata-ml/strata/tensor"
)

// goldenSeq is the golden file's Sequential, built as PyTorch's
// Sequential(Linear(3,8), ReLU, Linear(8,8), SiLU, RMSNorm(8), Linear(8,2)).
func goldenSeq(t *testing.T, o nn.Options) *nn.Sequential {
	lin := func(in, out int) *nn.Linear { return nn.Must(nn.NewLinear(o, "", in, out, true, 0)) }
	s, err := nn.NewSequential("", lin(3, 8), nn.Func(nn.ReLU), lin(8, 8), nn.Func(nn.SiLU),
		nn.Must(nn.NewRMSNorm(o, "", 8)), lin(8, 2))
	require.NoError(t, err)
	return s
}

func TestSequentialMatchesPyTorch(t *testing.T) {
	g := readGolden(t)
	s := goldenSeq(t, nn.Options{DType: tensor.Float64})
	defer nn.Release(s.Parameters())
	var names []string
	for _, p := range s.Parameters() {
		names = append(names, p.Name)
		w, ok := g["seq."+p.Name]
		require.True(t, ok, "PyTorch's state_dict has no %q", p.Name)
		p.Value.CopyFrom(w)
	}
	require.Equal(t, []string{"0.weight", "0.bias", "2.weight", "2.bias", "4.weight", "5.weight", "5.bias"}, names)
	tensor.WithScope(func() {
		y := s.Forward(autograd.Const(g["seq.x"]))
		require.Less(t, relErr(y.Value.Float64s(), g["seq.y"].Float64s()), 1e-12, "y")
		loss := nn.MSELoss(y, autograd.Const(g["seq.target"]), nn.ReduceMean)
		require.InDelta(t, g["seq.loss"].Item(), loss.Item(), 1e-14)
		require.NoError(t, loss.Backward())
		for _, p := range s.Parameters() {
			require.Less(t, relErr(p.Grad.Float64s(), g["seq.grad."+p.Name].Float64s()), 1e-11, "grad %s", p.Name)
		}
	})
}

func TestSequentialNames(t *testing.T) {
	o := nn.Options{}
	inner := nn.Must(nn.NewSequential("", nn.Must(nn.NewLinear(o, "", 2, 3, true, 0)), nn.Func(nn.GELU)))
	named := nn.Must(nn.NewLinear(o, "fc", 3, 1, false, 0))
	outer := nn.Must(nn.NewSequential("net", inner, &nn.Dropout{P: 0.5}, named))
	defer nn.Release(outer.Parameters())
	var names []string
	for _, p := range outer.Parameters() {
		names = append(names, p.Name)
		// The var's name (errors, anomaly reports) and the storage's label
		// (placement plans, snapshots) follow.
		require.Equal(t, p.Name, p.Var.Name())
		require.Equal(t, p.Name, p.Value.Allocation().Label())
	}
	// PyTorch's nested names; a layer built with a name keeps it under its index.
	require.Equal(t, []string{"net.0.0.weight", "net.0.0.bias", "net.2.fc.weight"}, names)
	_, err := nn.ByName(outer.Parameters())
	require.NoError(t, err)

	// A layer given twice, a nil layer, a nil Func: errors, nothing renamed.
	l := nn.Must(nn.NewLinear(o, "", 2, 2, true, 0))
	defer nn.Release(l.Parameters())
	_, err = nn.NewSequential("s", l, nn.Func(nn.ReLU), l)
	require.ErrorIs(t, err, tensor.ErrArgument)
	require.Equal(t, "weight", l.Weight.Name)
	_, err = nn.NewSequential("s", l, nil)
	require.ErrorIs(t, err, tensor.ErrArgument)
	_, err = nn.NewSequential("s", nn.Func(nil))
	require.ErrorIs(t, err, tensor.ErrArgument)
	var nilLinear *nn.Linear
	_, err = nn.NewSequential("s", nilLinear)
	require.ErrorIs(t, err, tensor.ErrArgument)
	// A Func may repeat.
	_, err = nn.NewSequential("s", nn.Func(nn.ReLU), nn.Func(nn.ReLU))
	require.NoError(t, err)
}

func TestSequentialGradCheck(t *testing.T) {
	s := goldenSeq(t, nn.Options{DType: tensor.Float64})
	defer nn.Release(s.Parameters())
	ps := s.Parameters()
	xs := []*tensor.Tensor{tensor.Zeros(tensor.CPU(), tensor.Float64, 4, 3)}
	tensor.Keep(xs[0])
	defer xs[0].Release()
	tensor.WithScope(func() {
		xs[0].CopyFrom(tensor.FromFloat64s(tensor.CPU(), []float64{0.3, -1.2, 0.8, 1.5, 0.1, -0.4, -0.9, 2.0, 0.6, -0.2, 0.7, -1.1}, 4, 3))
	})
	for _, p := range ps {
		xs = append(xs, p.Value)
	}
	// Gradients with respect to the input and every parameter, through the
	// same layers with the parameters swapped for GradCheck's vars.
	require.NoError(t, autograd.GradCheck(func(v []*autograd.Var) *autograd.Var {
		saved := make([]*autograd.Var, len(ps))
		for i, p := range ps {
			saved[i], p.Var = p.Var, v[i+1]
		}
		defer func() {
			for i, p := range ps {
				p.Var = saved[i]
			}
		}()
		return s.Forward(v[0])
	}, xs, nil, 1e-6, 1e-7, 1e-6))
}

func TestFeedForward(t *testing.T) {
	// A seed of its own: the spread check below fails for some draws of a
	// 3-element bias, and the shared default stream's position depends on
	// the tests before this one.
	o := nn.Options{Rng: rand.New(rand.NewPCG(11, 12))}
	m, err := nn.NewFeedForward(o, "mlp", nil, 4, 16, 16, 3)
	require.NoError(t, err)
	defer nn.Release(m.Parameters())
	var names []string
	for _, p := range m.Parameters() {
		names = append(names, p.Name)
	}
	require.Equal(t, []string{"mlp.0.weight", "mlp.0.bias", "mlp.2.weight", "mlp.2.bias", "mlp.4.weight", "mlp.4.bias"}, names)
	require.Equal(t, 4*16+16+16*16+16+16*3+3, nn.CountParams(m.Parameters()))
	// PyTorch's default initialisation: uniform(−1/√in, 1/√in), weights
	// and biases alike.
	for i, in := range []int{4, 16, 16} {
		k := 1 / math.Sqrt(float64(in))
		for _, p := range m.Layers[2*i].Parameters() {
			var lo, hi float64
			for _, v := range p.Value.Float64s() {
				require.LessOrEqual(t, math.Abs(v), k, p.Name)
				lo, hi = min(lo, v), max(hi, v)
			}
			require.Greater(t, hi-lo, k/2, "%s spreads over its range", p.Name)
		}
	}
	tensor.WithScope(func() {
		y := m.Forward(autograd.Const(tensor.Ones(tensor.CPU(), tensor.Float32, 5, 4)))
		require.Equal(t, []int{5, 3}, y.Shape())
	})
	_, err = nn.NewFeedForward(o, "mlp", nn.ReLU, 4)
	require.ErrorIs(t, err, tensor.ErrArgument)
	_, err = nn.NewFeedForward(o, "mlp", nn.ReLU, 4, 0, 2)
	require.ErrorIs(t, err, tensor.ErrArgument)
}

// TestSequentialRefusesNilParameter: a layer whose parameter list holds a
// nil entry (a Linear literal without its Weight) crashed NewSequential
// with a nil-pointer panic while renaming, after renaming the layers
// before it; it is an error wrapping tensor.ErrArgument naming the layer,
// and nothing is renamed.
func TestSequentialRefusesNilParameter(t *testing.T) {
	l := nn.Must(nn.NewLinear(nn.Options{}, "", 2, 2, true, 0))
	defer nn.Release(l.Parameters())
	var err error
	require.NotPanics(t, func() { _, err = nn.NewSequential("s", l, &nn.Linear{}) })
	require.ErrorIs(t, err, tensor.ErrArgument)
	require.ErrorContains(t, err, "layer 1")
	require.Equal(t, "weight", l.Weight.Name, "nothing renamed")
}

// TestSequentialLiteralWithNilLayer: a Sequential written as a literal
// with a nil layer (a nil *Linear or Func; NewSequential refuses one)
// panics in Forward with an *tensor.OpError wrapping tensor.ErrArgument
// that names the layer, which tensor.Try returns; it was a nil-pointer
// panic that tensor.Try passes on.
func TestSequentialLiteralWithNilLayer(t *testing.T) {
	l := nn.Must(nn.NewLinear(nn.Options{}, "", 2, 2, true, 0))
	defer nn.Release(l.Parameters())
	for _, bad := range []nn.Layer{nil, (*nn.Linear)(nil), nn.Func(nil)} {
		s := &nn.Sequential{Layers: []nn.Layer{l, bad}}
		var err error
		require.NotPanics(t, func() {
			err = tensor.Try(func() {
				tensor.WithScope(func() { s.Forward(autograd.Const(tensor.Ones(tensor.CPU(), tensor.Float32, 1, 2))) })
			})
		}, "%T", bad)
		require.ErrorIs(t, err, tensor.ErrArgument, "%T", bad)
		require.ErrorContains(t, err, "layer 1 is nil", "%T", bad)
	}
}
