package tensor_test

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/tensor"
)

// A file whose header truthfully describes 2 TiB of data (a sparse file,
// which costs no disk) is refused before its data is read, naming its
// size and the host memory available: it was read into one slice, and the
// failed allocation killed the process ("fatal error: runtime: out of
// memory"). Both readers of whole files refuse it, nn's loader through
// ReadSafetensorsFile.
func TestReadSafetensorsRefusesFileLargerThanHostMemory(t *testing.T) {
	const data = 2 << 40
	avail, ok := memory.HostAvailable()
	if !ok || avail >= data {
		t.Skipf("host memory available: %d bytes (readable: %v); the test needs less than %d", avail, ok, int64(data))
	}
	hdr := fmt.Sprintf(`{"x":{"dtype":"F32","shape":[%d],"data_offsets":[0,%d]}}`, data/4, data)
	for len(hdr)%8 != 0 {
		hdr += " "
	}
	buf := binary.LittleEndian.AppendUint64(nil, uint64(len(hdr)))
	buf = append(buf, hdr...)
	path := filepath.Join(t.TempDir(), "huge.safetensors")
	require.NoError(t, os.WriteFile(path, buf, 0o644))
	if err := os.Truncate(path, int64(len(buf))+data); err != nil {
		t.Skipf("this file system cannot hold a sparse file of 2 TiB: %v", err)
	}
	size := int64(len(buf)) + data
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := tensor.ReadSafetensorsFile(path)
	require.ErrorIs(t, err, memory.ErrOutOfMemory)
	require.ErrorContains(t, err, fmt.Sprintf("tensor: safetensors %s: reading its 2.00 TiB (%d bytes) needs as much host memory; ", path, size))
	tensor.WithScope(func() {
		_, _, err = tensor.ReadSafetensors(path, tensor.CPU())
	})
	runtime.ReadMemStats(&after)
	require.ErrorIs(t, err, memory.ErrOutOfMemory)
	require.True(t, strings.HasPrefix(err.Error(), "tensor: safetensors "+path+": reading its 2.00 TiB"), "one prefix: %v", err)
	require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(1<<20), "bytes allocated to refuse the file")
}
