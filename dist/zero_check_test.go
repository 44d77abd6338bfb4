package dist_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/dist"
	"github.com/strata-ml/strata/nn"
	"github.com/strata-ml/strata/tensor"
)

// TestZeroAdamWRefusesBadParameters: a parameter whose value is not
// contiguous (its update would be written into a copy and lost) and a
// parameter given twice are errors naming the parameter.
func TestZeroAdamWRefusesBadParameters(t *testing.T) {
	g := newGPT(t, tinyGPT, 1)
	ps := g.Parameters()
	coll := dist.NewLocalGroup(1)[0]

	_, err := dist.NewZeroAdamW(coll, append(ps[:1:1], ps[0]), 1e-3, 0)
	require.ErrorIs(t, err, tensor.ErrArgument)
	require.ErrorContains(t, err, ps[0].Name)

	w := tensor.FromFloat32s(tensor.CPU(), []float32{1, 2, 3, 4, 5, 6}, 2, 3)
	tensor.Keep(w)
	defer w.Release()
	wt := w.T()
	tensor.Keep(wt)
	defer wt.Release()
	p := &nn.Parameter{Var: autograd.Param(wt, "wt"), Name: "wt"}
	_, err = dist.NewZeroAdamW(coll, []*nn.Parameter{p}, 1e-3, 0)
	require.ErrorIs(t, err, tensor.ErrArgument)
	require.ErrorContains(t, err, "wt")
}
