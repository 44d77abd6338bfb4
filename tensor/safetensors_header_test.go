package tensor_test

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/tensor"
)

// Both readers refuse a header over the one limit, 100,000,000 bytes (the
// safetensors format's), with an error wrapping ErrArgument that names the
// limit: ReadSafetensorsMetadata used to cap it at 100 MiB instead.
func TestSafetensorsHeaderLimitIsShared(t *testing.T) {
	b := binary.LittleEndian.AppendUint64(nil, 100_000_001)
	b = append(b, "{}      "...)
	path := filepath.Join(t.TempDir(), "long.safetensors")
	require.NoError(t, os.WriteFile(path, b, 0o644))

	_, err := tensor.ReadSafetensorsMetadata(path)
	require.ErrorIs(t, err, tensor.ErrArgument)
	require.ErrorContains(t, err, "over the limit of 100000000 bytes")

	_, _, err = tensor.ReadSafetensors(path, cpu)
	require.ErrorIs(t, err, tensor.ErrArgument)
	require.ErrorContains(t, err, "over the limit of 100000000 bytes")
}
