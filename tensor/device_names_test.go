package tensor_test

// Messages that named two different devices alike, leaked the internal
// kernel package's names, or gave a wrong ids dtype the wrong sentinel.

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/tensor"
)

// Two CPU devices are told apart: "operands on cpu and cpu" named one
// device twice.
func TestTwoCPUDevicesAreNamedApart(t *testing.T) {
	own := tensor.NewCPUDevice(memory.NewHostManager(memory.Config{}))
	require.NotEqual(t, cpu.String(), own.String())
	require.Equal(t, "cpu", cpu.String())
	tensor.WithScope(func() {
		table := tensor.Zeros(own, tensor.Float32, 4, 2)
		ids := tensor.FromInt32s(cpu, []int32{0, 1}, 2)
		err := tensor.Try(func() { tensor.Embedding(table, ids) })
		require.ErrorIs(t, err, tensor.ErrDevice)
		require.Contains(t, err.Error(), own.String())
		require.NotContains(t, err.Error(), "cpu and cpu:")
		t.Log(err)
	})
}

// Ids of a float dtype are a dtype error (ErrDType), and an id out of
// range names the public op, not the kernel package.
func TestEmbeddingIdsErrors(t *testing.T) {
	tensor.WithScope(func() {
		table := tensor.Zeros(cpu, tensor.Float32, 4, 2)
		err := tensor.Try(func() { tensor.Embedding(table, tensor.FromFloat32s(cpu, []float32{0, 1}, 2)) })
		require.ErrorIs(t, err, tensor.ErrDType)
		err = tensor.Try(func() { tensor.Embedding(table, tensor.FromInt32s(cpu, []int32{0, 9}, 2)) })
		require.ErrorIs(t, err, tensor.ErrArgument)
		require.NotContains(t, err.Error(), "cpukern")
		require.Contains(t, err.Error(), "tensor.Embedding: ids[1] = 9")
		t.Log(err)
		logits := tensor.Zeros(cpu, tensor.Float32, 2, 3)
		err = tensor.Try(func() { tensor.CrossEntropy(logits, tensor.FromInt32s(cpu, []int32{0, 7}, 2), -100) })
		require.ErrorIs(t, err, tensor.ErrArgument)
		require.NotContains(t, err.Error(), "cpukern")
		t.Log(err)
	})
}
