package tensor_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/tensor"
)

// TestReadSafetensorsEntries: the entries are the file's tensors in the
// data's order (not the header's), each with its dtype, shape and bytes;
// a file with two tensors of unsupported dtypes is refused naming the
// first in the data, on every read (the header's map gives them in a
// random order).
func TestReadSafetensorsEntries(t *testing.T) {
	header := `{"b":{"dtype":"F32","shape":[2],"data_offsets":[2,10]},"a":{"dtype":"BF16","shape":[1,1],"data_offsets":[0,2]},"__metadata__":{"k":"v"}}`
	data := []byte{128, 63, 0, 0, 128, 63, 0, 0, 0, 64} // a: 1 (bfloat16); b: 1, 2
	es, meta, err := tensor.ReadSafetensorsEntries(rawSafetensors(t, header, data))
	require.NoError(t, err)
	require.Equal(t, map[string]string{"k": "v"}, meta)
	require.Equal(t, []tensor.SafetensorsEntry{
		{Name: "a", DType: tensor.BFloat16, Shape: []int{1, 1}, Data: data[:2]},
		{Name: "b", DType: tensor.Float32, Shape: []int{2}, Data: data[2:]},
	}, es)

	bad := `{"y":{"dtype":"I64","shape":[1],"data_offsets":[8,16]},"x":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}}`
	path := rawSafetensors(t, bad, make([]byte, 16))
	for range 20 {
		_, _, err := tensor.ReadSafetensorsEntries(path)
		require.ErrorIs(t, err, tensor.ErrDType)
		require.ErrorContains(t, err, `tensor "x" has unsupported dtype`)
	}
}
