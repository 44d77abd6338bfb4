package nn_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/nn"
	"github.com/strata-ml/strata/tensor"
)

// TestTrainStep fits y = 2x − 1 with one Linear: TrainStep equals the
// hand-written loop step for step, keeps memory flat and reports errors.
func TestTrainStep(t *testing.T) {
	xs := []float32{-1, -0.5, 0, 0.5, 1, 1.5}
	ys := make([]float32, len(xs))
	for i, x := range xs {
		ys[i] = 2*x - 1
	}
	newModel := func() (*nn.Linear, *nn.SGD) {
		l := nn.Must(nn.NewLinear(nn.Options{Rng: rand.New(rand.NewPCG(3, 3))}, "fc", 1, 1, true, 0))
		return l, nn.NewSGD(l.Parameters(), 0.1, 0.9)
	}
	c := tensor.NewCtx()
	lossOf := func(l *nn.Linear) *autograd.Var {
		x := autograd.Const(c.FromFloat32s(tensor.CPU(), xs, len(xs), 1))
		y := autograd.Const(c.FromFloat32s(tensor.CPU(), ys, len(ys), 1))
		return nn.MSELoss(l.Forward(x), y, nn.ReduceMean)
	}

	a, optA := newModel()
	b, optB := newModel()
	defer nn.Release(nn.Collect(a, b))
	defer optA.Release()
	defer optB.Release()
	var inUse int64
	var last float64
	for step := range 100 {
		got, err := nn.TrainStep(c, a.Parameters(), optA, func() *autograd.Var { return lossOf(a) })
		require.NoError(t, err)
		var want float64
		require.NoError(t, tensor.Try(func() {
			c.WithScope(func() {
				nn.ZeroGrad(b.Parameters())
				l := lossOf(b)
				want = l.Item()
				require.NoError(t, l.Backward())
				require.NoError(t, optB.Step())
			})
		}))
		require.Equal(t, want, got, "step %d", step)
		if step == 1 {
			inUse = c.BytesInUse()
		}
		last = got
	}
	require.Equal(t, inUse, c.BytesInUse(), "memory after every step equals that after the first")
	nn.ZeroGrad(nn.Collect(a, b)) // the gradients stay after a step
	require.Zero(t, c.BytesInUse(), "the step's scope released everything else")
	require.Less(t, last, 1e-4)
	require.InDelta(t, 2, a.Weight.Value.Item(), 0.02)
	require.InDelta(t, -1, a.Bias.Value.Item(), 0.02)

	// A shape mistake is an error, not a panic.
	_, err := nn.TrainStep(c, a.Parameters(), optA, func() *autograd.Var {
		return a.Forward(autograd.Const(c.Zeros(tensor.CPU(), tensor.Float32, 2, 3)))
	})
	require.ErrorIs(t, err, tensor.ErrShape)

	// A non-scalar loss: Item's error.
	_, err = nn.TrainStep(c, a.Parameters(), optA, func() *autograd.Var {
		return a.Forward(autograd.Const(c.Zeros(tensor.CPU(), tensor.Float32, 2, 1)))
	})
	require.ErrorIs(t, err, tensor.ErrShape)

	// A NaN loss: ErrNonFinite, and the parameters are unchanged.
	w := a.Weight.Value.Item()
	v, err := nn.TrainStep(c, a.Parameters(), optA, func() *autograd.Var {
		return autograd.Scale(lossOf(a), math.NaN())
	})
	require.ErrorIs(t, err, nn.ErrNonFinite)
	require.True(t, math.IsNaN(v))
	require.Equal(t, w, a.Weight.Value.Item())

	// The optimizer's error.
	bad := nn.NewSGD(a.Parameters(), 0.1, 0)
	bad.Nesterov = true
	_, err = nn.TrainStep(c, a.Parameters(), bad, func() *autograd.Var { return lossOf(a) })
	require.ErrorContains(t, err, "Nesterov")
	nn.ZeroGrad(a.Parameters())
	require.Zero(t, c.BytesInUse())
}

func TestStep(t *testing.T) {
	sentinel := errors.New("mine")
	require.ErrorIs(t, nn.Step(nil, func() error { return sentinel }), sentinel)
	require.NoError(t, nn.Step(nil, func() error {
		tensor.Zeros(tensor.CPU(), tensor.Float32, 4) // in Background's new scope
		return nil
	}))
	err := nn.Step(nil, func() error {
		tensor.Add(tensor.Zeros(tensor.CPU(), tensor.Float32, 2), tensor.Zeros(tensor.CPU(), tensor.Float32, 3))
		return nil
	})
	require.ErrorIs(t, err, tensor.ErrShape)
	require.Panics(t, func() { _ = nn.Step(nil, func() error { panic("a bug") }) })
}

// TestStepRefusesNilFunction: Step with a nil function returns an error
// wrapping tensor.ErrArgument, as TrainStep does for a nil loss function,
// instead of calling it: a nil-pointer panic, which Step passes on as a
// bug's.
func TestStepRefusesNilFunction(t *testing.T) {
	var err error
	require.NotPanics(t, func() { err = nn.Step(nil, nil) })
	require.ErrorIs(t, err, tensor.ErrArgument)
	require.ErrorContains(t, err, "nil step function")
}
