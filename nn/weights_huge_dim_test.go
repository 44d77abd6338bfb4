package nn_test

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/nn"
	"github.com/strata-ml/strata/tensor"
)

// A dimension of 2^63 or more beside a 0 (0 elements, 0 bytes: the
// format's checks pass it) is refused by the weights loader naming the
// dimension as the file wrote it: it read as a negative int, and the
// error gave "shape [0 -9223372036854775808] in the file".
func TestLoadWeightsHugeDimensionNamed(t *testing.T) {
	hdr := `{"w":{"dtype":"F32","shape":[0,9223372036854775808],"data_offsets":[0,0]}}`
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(hdr)))
	path := filepath.Join(t.TempDir(), "huge.safetensors")
	require.NoError(t, os.WriteFile(path, append(b, hdr...), 0o644))
	tensor.WithScope(func() {
		p := &nn.Parameter{Var: autograd.Param(tensor.Zeros(tensor.CPU(), tensor.Float32, 0, 2), "w"), Name: "w"}
		defer nn.Release([]*nn.Parameter{p})
		for _, layout := range []nn.Layout{nn.LayoutNanoGPT, nn.LayoutHF, nn.LayoutAuto} {
			_, _, err := nn.LoadWeightsLayout(path, []*nn.Parameter{p}, layout)
			require.ErrorIs(t, err, tensor.ErrShape, "%v", layout)
			require.ErrorContains(t, err, `tensor "w": shape [0 9223372036854775808]: dimension 1 is 9223372036854775808, more than an int holds`, "%v", layout)
			require.NotContains(t, err.Error(), "-9223372036854775808", "%v", layout)
		}
	})
}
