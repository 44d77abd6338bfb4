package tensor_test

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/tensor"
)

// A valid file followed by a 200 GB region (a sparse tail, which costs no
// disk) is refused from its header and size, without reading the tail:
// the file was read whole, and the allocation killed the process
// ("fatal error: runtime: out of memory"). A small tail (which gave
// "metadata incomplete buffer") and a file cut short are refused with
// both sizes and what is wrong; both readers refuse them alike.
func TestReadSafetensorsRefusesSizeOtherThanHeader(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "w.safetensors")
	tensor.WithScope(func() {
		x := tensor.FromFloat32s(tensor.CPU(), []float32{1, 2, 3, 4, 5, 6}, 2, 3)
		require.NoError(t, tensor.WriteSafetensors(path, map[string]*tensor.Tensor{"x": x}, map[string]string{"k": "v"}))
	})
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	n := int64(len(b))
	write := func(name string, size int64) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, b, 0o644))
		require.NoError(t, os.Truncate(p, size))
		return p
	}
	cases := []struct {
		path string
		want string
	}{
		{write("sparse.safetensors", n+200<<30), fmt.Sprintf("%d bytes past the tensors' data", 200<<30)},
		{write("tail.safetensors", n+16), "16 bytes past the tensors' data"},
		{write("short.safetensors", n-4), "4 bytes short"},
	}
	for _, c := range cases {
		fi, err := os.Stat(c.path)
		require.NoError(t, err)
		want := fmt.Sprintf("tensor: safetensors %s: its header describes a file of %d bytes, it has %d on disk: %s", c.path, n, fi.Size(), c.want)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		tensor.WithScope(func() {
			_, _, err = tensor.ReadSafetensors(c.path, tensor.CPU())
		})
		runtime.ReadMemStats(&after)
		require.ErrorIs(t, err, tensor.ErrArgument, c.path)
		require.EqualError(t, err, want+": invalid argument")
		require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(1<<20), "bytes allocated to refuse %s", c.path)
		_, err = tensor.ReadSafetensorsMetadata(c.path)
		require.ErrorIs(t, err, tensor.ErrArgument, c.path)
		require.EqualError(t, err, want+": invalid argument")
	}
	tensor.WithScope(func() {
		got, meta, err := tensor.ReadSafetensors(path, tensor.CPU())
		require.NoError(t, err)
		require.Equal(t, []float32{1, 2, 3, 4, 5, 6}, got["x"].Float32s())
		require.Equal(t, map[string]string{"k": "v"}, meta)
	})
}

// The size a header describes is found by a pass over its bytes, and by
// a parse where that pass does not find the file's size: a header that
// writes "data_offsets" with an escape, or with spaces, or has a
// metadata entry of that name, is read as the format reads it, and not
// refused.
func TestReadSafetensorsSizeOfUnusualHeaders(t *testing.T) {
	data := []byte{0, 0, 128, 63, 0, 0, 0, 64} // float32 1, 2
	for _, hdr := range []string{
		`{"x":{"dtype":"F32","shape":[2],"data\u005foffsets":[0,8]}}`,
		`{"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"y":{"dtype":"F32","shape":[1],"data\u005foffsets":[4,8]}}`,
		"{ \"x\" : { \"dtype\" : \"F32\" , \"shape\" : [ 2 ] , \"data_offsets\" : [ 0 ,\n 8 ] } }",
		`{"__metadata__":{"data_offsets":"[0,99]"},"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`,
	} {
		path := rawSafetensors(t, hdr, data)
		tensor.WithScope(func() {
			got, _, err := tensor.ReadSafetensors(path, tensor.CPU())
			require.NoError(t, err, hdr)
			n := 0
			for _, x := range got {
				n += x.Numel()
			}
			require.Equal(t, 2, n, hdr)
		})
		_, err := tensor.ReadSafetensorsMetadata(path)
		require.NoError(t, err, hdr)
		short := rawSafetensors(t, hdr, data[:6])
		_, _, err = tensor.ReadSafetensors(short, tensor.CPU())
		require.ErrorContains(t, err, ": 2 bytes short", hdr)
	}
}
