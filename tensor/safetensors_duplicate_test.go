package tensor_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/tensor"
)

// stEntry is the header entry of a float32 tensor of one element at
// element i of the data.
func stEntry(i int) string {
	return fmt.Sprintf(`{"dtype":"F32","shape":[1],"data_offsets":[%d,%d]}`, 4*i, 4*i+4)
}

// A header in which one object has a key twice (JSON that encoding/json
// reads with the last one winning) is refused by both readers, with an
// error naming the file and the key and wrapping ErrArgument: a tensor
// name twice, "__metadata__" twice, a metadata key twice, or a key of one
// tensor's entry twice.
func TestReadSafetensorsRefusesDuplicateKeys(t *testing.T) {
	a := stEntry(0)
	var many strings.Builder // 100 tensors, then t0 again
	many.WriteString("{")
	for i := range 100 {
		fmt.Fprintf(&many, `"t%d":%s,`, i, stEntry(i))
	}
	fmt.Fprintf(&many, `"t0":%s}`, stEntry(0))
	for _, c := range []struct {
		name, header string
		n            int    // tensors in the data
		want         string // in the error
	}{
		{"tensor name", `{"a":` + a + `,"a":` + a + `}`, 1, `duplicate tensor name "a"`},
		{"tensor name escaped", `{"a":` + a + `,"\u0061":` + a + `}`, 1, `duplicate tensor name "a"`},
		{"tensor name among many", many.String(), 100, `duplicate tensor name "t0"`},
		{"__metadata__", `{"__metadata__":{"k":"v"},"a":` + a + `,"__metadata__":{"k":"w"}}`, 1, `duplicate key "__metadata__"`},
		{"metadata key", `{"__metadata__":{"k":"v","j":"v","k":"w"},"a":` + a + `}`, 1, `duplicate key "k" in __metadata__`},
		{"dtype", `{"a":{"dtype":"F64","dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, 1, `duplicate key "dtype" in tensor "a"`},
		{"shape", `{"a":{"dtype":"F32","shape":[2],"shape":[1],"data_offsets":[0,4]}}`, 1, `duplicate key "shape" in tensor "a"`},
		{"data_offsets", `{"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8],"data_offsets":[0,4]}}`, 1, `duplicate key "data_offsets" in tensor "a"`},
		{"second tensor", `{"a":` + a + `,"b":{"dtype":"F32","shape":[1],"shape":[1],"data_offsets":[4,8]}}`, 2, `duplicate key "shape" in tensor "b"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := rawSafetensors(t, c.header, make([]byte, 4*c.n))
			tensor.WithScope(func() {
				got, meta, err := tensor.ReadSafetensors(path, cpu)
				require.ErrorIs(t, err, tensor.ErrArgument)
				require.ErrorContains(t, err, path)
				require.ErrorContains(t, err, c.want)
				require.Nil(t, got)
				require.Nil(t, meta)
			})
			_, err := tensor.ReadSafetensorsMetadata(path)
			require.ErrorIs(t, err, tensor.ErrArgument)
			require.ErrorContains(t, err, path)
			require.ErrorContains(t, err, c.want)
		})
	}
}

// Keys are duplicates only within one object: the same name at two
// levels, names that differ in case, and a file of many tensors are read.
func TestReadSafetensorsDistinctKeys(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"__metadata__":{"k":"v","a":"x","dtype":"y"},`)
	n := 3000
	for i := range n {
		fmt.Fprintf(&b, `"t%d":%s,`, i, stEntry(i))
	}
	fmt.Fprintf(&b, `"k":%s,"dtype":%s,"a":%s,"A":%s}`, stEntry(n), stEntry(n+1), stEntry(n+2), stEntry(n+3))
	data := make([]byte, 4*(n+4))
	for i := range n + 4 {
		data[4*i+3] = 0x3f // 0x3f000000: float32 0.5
	}
	path := rawSafetensors(t, b.String(), data)
	tensor.WithScope(func() {
		got, meta, err := tensor.ReadSafetensors(path, cpu)
		require.NoError(t, err)
		require.Equal(t, map[string]string{"k": "v", "a": "x", "dtype": "y"}, meta)
		require.Len(t, got, n+4)
		for _, name := range []string{"t0", "t2999", "k", "dtype", "a", "A"} {
			require.Equal(t, []float32{0.5}, got[name].Float32s(), name)
		}
	})
	meta, err := tensor.ReadSafetensorsMetadata(path)
	require.NoError(t, err)
	require.Equal(t, map[string]string{"k": "v", "a": "x", "dtype": "y"}, meta)
}
