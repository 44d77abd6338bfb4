package nn_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/nn"
)

// TestParsersAnyCase: every name parser of nn reads its names in any case,
// as tensor.ParseDevice, tensor.ParseDType and nn.ParseLayout do, and
// names the package in its error.
func TestParsersAnyCase(t *testing.T) {
	for _, s := range []string{"Selective", "SELECTIVE", "selective"} {
		m, err := nn.ParseCheckpointMode(s)
		require.NoError(t, err, s)
		require.Equal(t, nn.CheckpointSelective, m, s)
	}
	for _, s := range []string{"Fused", "FUSED"} {
		h, err := nn.ParseHeadLoss(s)
		require.NoError(t, err, s)
		require.Equal(t, nn.HeadLoss{Fused: true}, h, s)
		a, err := nn.ParseAttention(s)
		require.NoError(t, err, s)
		require.Equal(t, nn.AttentionFused, a, s)
	}
	l, err := nn.ParseLayout("NanoGPT")
	require.NoError(t, err)
	require.Equal(t, nn.LayoutNanoGPT, l)

	_, err = nn.ParseCheckpointMode("all")
	require.EqualError(t, err, `nn: checkpoint mode "all": want none, blocks or selective`)
	_, err = nn.ParseHeadLoss("half")
	require.EqualError(t, err, `nn: head loss "half": want full or fused`)
	_, err = nn.ParseAttention("Flash")
	require.EqualError(t, err, `nn: attention "Flash": want plain or fused`)
}
