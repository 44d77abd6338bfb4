//go:build unix

package tensor_test

import (
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/tensor"
)

// TestReadSafetensorsRefusesNonRegularFiles: a device or a named pipe is
// refused at once with an error naming it. os.ReadFile of /dev/zero grew
// its buffer without end (before session 40; a reviewer helper found it),
// and of a named pipe blocked.
func TestReadSafetensorsRefusesNonRegularFiles(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "w.safetensors")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	for _, path := range []string{"/dev/zero", fifo} {
		done := make(chan error, 1)
		go func() { _, _, err := tensor.ReadSafetensors(path, tensor.CPU()); done <- err }()
		select {
		case err := <-done:
			require.ErrorIs(t, err, tensor.ErrArgument, path)
			require.ErrorContains(t, err, path)
		case <-time.After(10 * time.Second):
			t.Fatalf("ReadSafetensors(%s) still running after 10 s", path)
		}
	}
}
