package nn

import (
	"os"
	"testing"
	"time"

	st "github.com/nlpodyssey/safetensors"
	"github.com/stretchr/testify/require"
)

// TimeFiniteCheck is how long checkFinite takes over every tensor of the
// safetensors file at path.
func TimeFiniteCheck(t testing.TB, path string) time.Duration {
	buf, err := os.ReadFile(path)
	require.NoError(t, err)
	f, err := st.Deserialize(buf)
	require.NoError(t, err)
	start := time.Now()
	for _, nv := range f.Tensors() {
		dt, err := floatDType(nv.TensorView)
		require.NoError(t, err)
		require.NoError(t, checkFinite(nv.TensorView, dt))
	}
	return time.Since(start)
}
