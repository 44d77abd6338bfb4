package tensor_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/tensor"
)

// ReadSafetensors counts a header's keys instead of parsing it a second
// time for a key given twice: a key hidden from a careless count (after a
// string that ends in an escaped backslash, or holds an escaped quote and
// a ':') is still found, and a header read without a key twice, one with
// such strings and whitespace before the ':'s among them, is read.
func TestReadSafetensorsDuplicateKeysAfterEscapes(t *testing.T) {
	a := stEntry(0)
	for name, hdr := range map[string]string{
		"after backslash": `{"__metadata__":{"k":"v\\","k":"w"},"a":` + a + `}`,
		"after quote":     `{"__metadata__":{"k":"\":\"k\":","j":"x"},"a":` + a + `,"a":` + a + `}`,
		"spaced":          `{"__metadata__" : {"k" : "v"} , "a"` + "\n:" + a + ` , "a"	: ` + a + `}`,
	} {
		path := rawSafetensors(t, hdr, make([]byte, 4))
		tensor.WithScope(func() {
			_, _, err := tensor.ReadSafetensors(path, cpu)
			require.ErrorIs(t, err, tensor.ErrArgument, name)
			require.ErrorContains(t, err, "duplicate", name)
		})
	}

	hdr := `{"__metadata__" : {"k\\" : "v\\", "j": "\"x\":\"y\"" },` + "\n" + `"a\"b" :` + a + `}`
	path := rawSafetensors(t, hdr, []byte{0, 0, 0, 0x3f})
	tensor.WithScope(func() {
		got, meta, err := tensor.ReadSafetensors(path, cpu)
		require.NoError(t, err)
		require.Equal(t, map[string]string{`k\`: `v\`, "j": `"x":"y"`}, meta)
		require.Equal(t, []float32{0.5}, got[`a"b`].Float32s())
	})
}

// The count relies on the safetensors library refusing a tensor entry
// that has other keys than dtype, shape and data_offsets (fewer or more),
// metadata whose values are not strings, and objects where numbers go: a
// version that took them would let the count of keys miss one given
// twice, and these would be read.
func TestReadSafetensorsHeaderShape(t *testing.T) {
	for name, hdr := range map[string]string{
		"two keys":        `{"a":{"dtype":"F32","shape":[1]}}`,
		"four keys":       `{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":{"y":1}}}`,
		"metadata object": `{"__metadata__":{"k":{"j":"v"}},"a":` + stEntry(0) + `}`,
		"object in shape": `{"a":{"dtype":"F32","shape":[{"k":1}],"data_offsets":[0,4]}}`,
		"null entry":      `{"a":null}`,
	} {
		path := rawSafetensors(t, hdr, make([]byte, 4))
		tensor.WithScope(func() {
			_, _, err := tensor.ReadSafetensors(path, cpu)
			require.ErrorContains(t, err, "bad header", name)
		})
	}
}
