package nn_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/nn"
	"github.com/strata-ml/strata/tensor"
)

// TestNewMLPRefusesBadDim: a dim whose hidden width 4*dim wraps was
// reported as NewLinear's "out = -4", and a negative one as "in = -3" of
// the c_fc layer; both now name NewMLP's dim.
func TestNewMLPRefusesBadDim(t *testing.T) {
	for _, c := range []struct {
		dim  int
		want string
	}{
		{math.MaxInt / 2, "overflows int"},
		{math.MaxInt/4 + 1, "overflows int"},
		{0, "dim = 0, want > 0"},
		{-3, "dim = -3, want > 0"},
	} {
		_, err := nn.NewMLP(nn.Options{}, "m", c.dim, 0.02)
		require.ErrorIs(t, err, tensor.ErrArgument, "dim %d", c.dim)
		require.ErrorContains(t, err, `NewMLP "m"`)
		require.ErrorContains(t, err, c.want)
	}
	m, err := nn.NewMLP(nn.Options{}, "m", 8, 0.02)
	require.NoError(t, err)
	require.Equal(t, []int{32, 8}, m.FC.Weight.Value.Shape())
	nn.Release(m.Parameters())
}
