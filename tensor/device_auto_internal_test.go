package tensor

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/cuda"
)

// ParseDevice("auto") falls back to the CPU silently when there is no
// driver or no GPU, and with one note naming the cause when the GPU is
// there but not usable.
func TestParseDeviceAutoNotesABrokenGPU(t *testing.T) {
	opener, to := cudaOpener, autoNoteTo
	defer func() { cudaOpener, autoNoteTo, autoNote = opener, to, sync.Once{} }()
	for _, tc := range []struct {
		name  string
		cause error
		note  bool
	}{
		{"no driver", cuda.ErrNoDriver, false},
		{"no device", cuda.ErrNoDevice, false},
		{"a driver that fails", errors.New("cuInit: CUDA_ERROR_UNKNOWN (999)"), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			autoNoteTo, autoNote = &out, sync.Once{}
			cudaOpener = func(n int) (Device, error) {
				return nil, fmt.Errorf("tensor: cuda:%d: %w: %w", n, ErrDevice, tc.cause)
			}
			for range 2 {
				d, err := ParseDevice("auto")
				require.NoError(t, err)
				require.Equal(t, KindCPU, d.Kind())
			}
			if !tc.note {
				require.Empty(t, out.String())
				return
			}
			require.Equal(t, 1, bytes.Count(out.Bytes(), []byte("\n")), "one note: %q", out.String())
			require.Contains(t, out.String(), "CUDA device 0 is not usable")
			require.Contains(t, out.String(), "CUDA_ERROR_UNKNOWN (999)")
		})
	}
}
