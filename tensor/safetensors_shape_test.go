package tensor_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/tensor"
)

// A header's dimension of 2^63 or more beside a 0 passes the format's own
// checks (0 elements, 0 bytes): it is refused naming the dimension as the
// file wrote it, not as the negative int it converts to.
func TestSafetensorsHugeDimensionNamed(t *testing.T) {
	for dim, wrapped := range map[string]string{
		"9223372036854775808":  "-9223372036854775808",
		"18446744073709551615": "-1",
	} {
		path := rawSafetensors(t, `{"a":{"dtype":"F32","shape":[0,`+dim+`],"data_offsets":[0,0]}}`, nil)
		_, _, err := tensor.ReadSafetensors(path, cpu)
		require.ErrorIs(t, err, tensor.ErrShape, dim)
		require.ErrorContains(t, err, `tensor "a": shape [0 `+dim+`]: dimension 1 is `+dim+`, more than an int holds`, dim)
		require.NotContains(t, err.Error(), wrapped, dim)
	}
	// Within int, but the nonzero dimensions multiply past 2^62: refused
	// as a new tensor of that shape is.
	path := rawSafetensors(t, `{"a":{"dtype":"F32","shape":[0,4611686018427387904,4611686018427387904],"data_offsets":[0,0]}}`, nil)
	_, _, err := tensor.ReadSafetensors(path, cpu)
	require.ErrorIs(t, err, tensor.ErrShape)
	require.ErrorContains(t, err, "nonzero dimensions multiply to more than 2^62")
}

// The overflow check of a new tensor's shape does not depend on where
// its 0 is: [2^62, 2^62, 0] was refused as "too many elements" (it has
// none), [0, 2^62, 2^62] taken with its first stride wrapped around to 0.
// Both are refused (their strides would overflow), as is a Reshape of an
// empty tensor to them.
func TestShapeOverflowBesideZero(t *testing.T) {
	tensor.WithScope(func() {
		for _, shape := range [][]int{{0, 1 << 62, 1 << 62}, {1 << 62, 1 << 62, 0}, {1 << 62, 0, 1 << 62}} {
			_, err := tensor.New(cpu, tensor.Float32, memory.RoleActivation, shape...)
			require.ErrorIs(t, err, tensor.ErrShape, "%v", shape)
			require.ErrorContains(t, err, "nonzero dimensions multiply to more than 2^62", "%v", shape)
			_, err = tensor.FromBytes(cpu, tensor.Float32, nil, shape...)
			require.ErrorContains(t, err, "nonzero dimensions multiply to more than 2^62", "%v", shape)
			err = tensor.Try(func() { tensor.Zeros(cpu, tensor.Float32, 0).Reshape(shape...) })
			require.ErrorContains(t, err, "nonzero dimensions multiply to more than 2^62", "%v", shape)
		}
		// At the limit they are taken, with strides that fit.
		e, err := tensor.New(cpu, tensor.Float32, memory.RoleActivation, 0, 1<<31, 1<<31)
		require.NoError(t, err)
		require.Equal(t, []int{1 << 62, 1 << 31, 1}, e.Strides())
		require.Equal(t, []int{1 << 31, 0, 1 << 31}, tensor.Zeros(cpu, tensor.Float32, 0).Reshape(1<<31, 0, 1<<31).Shape())
	})
}
