package tensor

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/memory"
)

// TestGPUExpandableRefused: a CUDA device over expandable device memory is
// refused unless EnvExpandableUnsafe says otherwise (cuda_device.go), with
// an error that names the setting and what to do.
func TestGPUExpandableRefused(t *testing.T) {
	if _, err := CUDA(0); err != nil {
		if os.Getenv("STRATA_REQUIRE_GPU") != "" {
			t.Fatalf("STRATA_REQUIRE_GPU is set, but cuda:0 is unavailable: %v", err)
		}
		t.Skipf("no CUDA device: %v", err)
	}
	t.Setenv(memory.EnvExpandableSegments, "1")
	t.Setenv(EnvExpandableUnsafe, "")
	d, err := newCUDADevice(0)
	if err == nil && !d.mem.Pool(memory.TierDevice).Expandable() {
		d.close()
		t.Skip("the device has no virtual memory API: no expandable segments to refuse")
	}
	require.Error(t, err)
	require.ErrorContains(t, err, memory.EnvExpandableSegments+"=1")
	require.ErrorContains(t, err, EnvExpandableUnsafe)
}

// TestFirstDiff is EnvMoveVerify's comparison.
func TestFirstDiff(t *testing.T) {
	require.Equal(t, -1, firstDiff([]byte{1, 2, 3}, []byte{1, 2, 3}))
	require.Equal(t, 1, firstDiff([]byte{1, 2, 3}, []byte{1, 5, 3}))
	require.Equal(t, 2, firstDiff([]byte{1, 2}, []byte{1, 2, 3}))
	require.NotEqual(t, fnv64([]byte{1, 2}), fnv64([]byte{2, 1}))
}
