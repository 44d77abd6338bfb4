//go:build unix

package nn_test

import (
	"math/rand/v2"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/nn"
	"github.com/strata-ml/strata/tensor"
)

// TestLoadWeightsRefusesNonRegularFiles: a device or a named pipe given
// as weights is refused at once, naming it (os.ReadFile of /dev/zero grew
// without end before session 40, and of a pipe blocked).
func TestLoadWeightsRefusesNonRegularFiles(t *testing.T) {
	g, err := nn.NewGPT(nn.GPTConfig{Vocab: 16, Context: 8, Layers: 1, Heads: 1, Width: 8},
		nn.Options{Device: tensor.CPU(), DType: tensor.Float32, Rng: rand.New(rand.NewPCG(1, 2))})
	require.NoError(t, err)
	defer nn.Release(g.Parameters())
	fifo := filepath.Join(t.TempDir(), "w.safetensors")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	for _, path := range []string{"/dev/zero", fifo} {
		done := make(chan error, 1)
		go func() { _, err := nn.LoadWeights(path, g.Parameters()); done <- err }()
		select {
		case err := <-done:
			require.ErrorIs(t, err, tensor.ErrArgument, path)
			require.ErrorContains(t, err, path)
		case <-time.After(10 * time.Second):
			t.Fatalf("LoadWeights(%s) still running after 10 s", path)
		}
	}
}
