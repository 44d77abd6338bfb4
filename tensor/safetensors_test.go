package tensor_test

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/tensor"
)

// rawSafetensors writes a safetensors file of header (JSON) and data to a
// new file and returns its path.
func rawSafetensors(t *testing.T, header string, data []byte) string {
	t.Helper()
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
	b = append(b, header...)
	b = append(b, data...)
	path := filepath.Join(t.TempDir(), "raw.safetensors")
	require.NoError(t, os.WriteFile(path, b, 0o644))
	return path
}

// A tensor named "__metadata__" would take the place of the metadata in
// the header, and no reader (this one or PyTorch's) could read the file:
// the write is refused and the old file kept.
func TestWriteSafetensorsRefusesMetadataName(t *testing.T) {
	tensor.WithScope(func() {
		path := filepath.Join(t.TempDir(), "x.safetensors")
		require.NoError(t, os.WriteFile(path, []byte("old"), 0o644))
		a := tensor.FromFloat32s(cpu, []float32{1, 2}, 2)
		for _, meta := range []map[string]string{nil, {"k": "v"}} {
			err := tensor.WriteSafetensors(path, map[string]*tensor.Tensor{"__metadata__": a}, meta)
			require.ErrorIs(t, err, tensor.ErrArgument)
			require.ErrorContains(t, err, "__metadata__")
		}
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		require.Equal(t, "old", string(b))
	})
}

// The header is UTF-8 JSON: a name or metadata string that is not valid
// UTF-8 would be written with U+FFFD in place of its bad bytes (two names
// could become one, and the file unreadable), so the write is refused.
func TestWriteSafetensorsRefusesInvalidUTF8(t *testing.T) {
	tensor.WithScope(func() {
		path := filepath.Join(t.TempDir(), "x.safetensors")
		a := tensor.FromFloat32s(cpu, []float32{1, 2}, 2)
		b := tensor.FromFloat32s(cpu, []float32{3, 4}, 2)
		for name, c := range map[string]struct {
			ts   map[string]*tensor.Tensor
			meta map[string]string
		}{
			"names":          {map[string]*tensor.Tensor{"a\xff": a, "a\xfe": b}, nil},
			"metadata key":   {map[string]*tensor.Tensor{"a": a}, map[string]string{"k\xff": "v"}},
			"metadata value": {map[string]*tensor.Tensor{"a": a}, map[string]string{"k": "v\xff"}},
		} {
			err := tensor.WriteSafetensors(path, c.ts, c.meta)
			require.ErrorIs(t, err, tensor.ErrArgument, name)
			require.ErrorContains(t, err, "UTF-8", name)
		}
		_, err := os.Stat(path)
		require.ErrorIs(t, err, os.ErrNotExist)
		// Valid UTF-8 beyond ASCII is fine.
		require.NoError(t, tensor.WriteSafetensors(path, map[string]*tensor.Tensor{"é": a}, map[string]string{"ключ": "値"}))
		got, meta, err := tensor.ReadSafetensors(path, cpu)
		require.NoError(t, err)
		require.Equal(t, []float32{1, 2}, got["é"].Float32s())
		require.Equal(t, map[string]string{"ключ": "値"}, meta)
	})
}

// A header that is not valid UTF-8 is refused, as PyTorch's safetensors
// refuses it, rather than read with its names changed.
func TestReadSafetensorsRefusesInvalidUTF8Header(t *testing.T) {
	path := rawSafetensors(t, "{\"a\xff\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", make([]byte, 4))
	tensor.WithScope(func() {
		_, _, err := tensor.ReadSafetensors(path, cpu)
		require.ErrorContains(t, err, "UTF-8")
	})
	_, err := tensor.ReadSafetensorsMetadata(path)
	require.ErrorContains(t, err, "UTF-8")
}

// ReadSafetensorsMetadata reads the "__metadata__" entry only, by its
// exact name: a tensor whose name differs from it in case is a tensor.
func TestReadSafetensorsMetadataExactKey(t *testing.T) {
	tensor.WithScope(func() {
		path := filepath.Join(t.TempDir(), "x.safetensors")
		a := tensor.FromFloat32s(cpu, []float32{1, 2}, 2)
		require.NoError(t, tensor.WriteSafetensors(path, map[string]*tensor.Tensor{"__METADATA__": a, "__Metadata__": a}, map[string]string{"k": "v"}))
		got, meta, err := tensor.ReadSafetensors(path, cpu)
		require.NoError(t, err)
		require.Len(t, got, 2)
		require.Equal(t, map[string]string{"k": "v"}, meta)
		meta, err = tensor.ReadSafetensorsMetadata(path)
		require.NoError(t, err)
		require.Equal(t, map[string]string{"k": "v"}, meta)
	})
	path := rawSafetensors(t, `{"__METADATA__":{"k":"v"}}`, nil)
	meta, err := tensor.ReadSafetensorsMetadata(path)
	require.NoError(t, err)
	require.Empty(t, meta)
}

// A header length longer than the file is an error found before the
// header is allocated: a 16-byte file does not cost 100 MiB.
func TestReadSafetensorsMetadataHeaderLongerThanFile(t *testing.T) {
	for _, n := range []uint64{100 << 20, 1 << 63, 9} {
		b := binary.LittleEndian.AppendUint64(nil, n)
		b = append(b, "{}      "...)
		path := filepath.Join(t.TempDir(), "lie.safetensors")
		require.NoError(t, os.WriteFile(path, b, 0o644))
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := tensor.ReadSafetensorsMetadata(path)
		runtime.ReadMemStats(&after)
		require.ErrorContains(t, err, "bad header", "%d", n)
		require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(1<<20), "%d", n)
	}
}

// Scalars and tensors without elements go there and back, with their
// shapes.
func TestSafetensorsScalarsAndEmpty(t *testing.T) {
	tensor.WithScope(func() {
		path := filepath.Join(t.TempDir(), "x.safetensors")
		in := map[string]*tensor.Tensor{
			"s": tensor.Scalar(cpu, tensor.Float64, 2.5),
			"z": tensor.Zeros(cpu, tensor.BFloat16, 0, 3),
			"e": tensor.Zeros(cpu, tensor.Int32, 0),
			"h": tensor.FromFloat32s(cpu, []float32{1.5, -2}, 2, 1).To(tensor.Float16),
		}
		require.NoError(t, tensor.WriteSafetensors(path, in, nil))
		got, meta, err := tensor.ReadSafetensors(path, cpu)
		require.NoError(t, err)
		require.Empty(t, meta)
		require.Len(t, got, len(in))
		for name, x := range in {
			require.Equal(t, x.DType(), got[name].DType(), name)
			require.True(t, slices.Equal(x.Shape(), got[name].Shape()), "%s: %v, want %v", name, got[name].Shape(), x.Shape())
			require.Equal(t, x.RawBytes(), got[name].RawBytes(), name)
		}
	})
}
