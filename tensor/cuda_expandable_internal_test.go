package tensor

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/memory"
)

// TestFirstDiff is EnvMoveVerify's comparison.
func TestFirstDiff(t *testing.T) {
	require.Equal(t, -1, firstDiff([]byte{1, 2, 3}, []byte{1, 2, 3}))
	require.Equal(t, 1, firstDiff([]byte{1, 2, 3}, []byte{1, 5, 3}))
	require.Equal(t, 2, firstDiff([]byte{1, 2}, []byte{1, 2, 3}))
	require.NotEqual(t, fnv64([]byte{1, 2}), fnv64([]byte{2, 1}))
}

// TestGPUExpandableUploadOrdered: on expandable device memory uploads were
// synchronous copies on the legacy default stream, which returned before
// the bytes had landed and which the device's non-blocking stream did not
// wait for, so a kernel queued right after an upload read what the block
// held before (session 20's wrong training results); since session 21
// they are staged and copied by kernel on the stream (cuda_stage.go). Each
// round uploads new values into a block the last round released and
// doubles them at once: the result must be exactly twice the new values.
func TestGPUExpandableUploadOrdered(t *testing.T) {
	d, err := newExpandableDevice(t)
	require.NoError(t, err)
	defer d.close()
	if !d.mem.Pool(memory.TierDevice).Expandable() {
		t.Skip("the device has no virtual memory API")
	}
	// 16 MiB (four staging chunks), one chunk and a bit (a short last
	// chunk), and a few bytes: the staged copy takes a while to land.
	sizes := []int{4 << 20, 1<<20 + 3, 5}
	for round := range 30 {
		n := sizes[round%len(sizes)]
		data := make([]float32, n)
		for i := range data {
			data[i] = float32(round*7 + i%1000)
		}
		x := FromFloat32s(d, data, n)
		y := Add(x, x)
		got := y.Float32s()
		x.Release()
		y.Release()
		for i, g := range got {
			if g != 2*data[i] {
				t.Fatalf("round %d (%d elements): element %d is %v, want %v: the kernel read the block before the upload landed", round, n, i, g, 2*data[i])
			}
		}
	}
}

// newExpandableDevice skips t without a GPU, else makes a CUDA device of
// its own with STRATA_EXPANDABLE_SEGMENTS=1.
func newExpandableDevice(t *testing.T) (*cudaDevice, error) {
	t.Helper()
	gpuForTest(t)
	t.Setenv(memory.EnvExpandableSegments, "1")
	return newCUDADevice(0)
}
