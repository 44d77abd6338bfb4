package tensor_test

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/tensor"
)

// TestScopeDoesNotGrowWithReleasedTensors: a scope around a long loop
// that releases what each pass makes kept a slot for every tensor it ever
// owned; its list now stays as long as what it owns, whether the newest
// tensor is released first or an older one is, and the tensors it still
// owns are released when it closes.
func TestScopeDoesNotGrowWithReleasedTensors(t *testing.T) {
	c := tensor.NewCtx()
	s := c.NewScope()
	keep := c.Zeros(tensor.CPU(), tensor.Float32, 2)
	var older *tensor.Tensor
	for i := range 10000 {
		a := c.Zeros(tensor.CPU(), tensor.Float32, 4)
		b := c.Zeros(tensor.CPU(), tensor.Float32, 4)
		if i%2 == 0 {
			b.Release() // the newest first
			a.Release()
		} else {
			older.Release() // an older one: a hole in the middle
			b.Release()
			older = a
			continue
		}
		if older == nil {
			older = c.Zeros(tensor.CPU(), tensor.Float32, 4)
		}
	}
	require.LessOrEqual(t, s.Len(), 3)
	require.LessOrEqual(t, tensor.ScopeSlots(s), 200, "the scope's list grew with released tensors")
	s.Close()
	require.True(t, keep.Released())
	require.True(t, older.Released())
}

// TestRandRefusesIntegerDType: RandN and RandUniform of Int32 truncated
// their samples to integers; PyTorch refuses them ("normal_kernel_cpu" not
// implemented for 'Int'), and so does strata, with ErrDType.
func TestRandRefusesIntegerDType(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for name, f := range map[string]func(){
		"RandN":       func() { tensor.RandN(tensor.CPU(), tensor.Int32, rng, 1, 3) },
		"RandUniform": func() { tensor.RandUniform(tensor.CPU(), tensor.Int32, rng, 0, 10, 3) },
	} {
		err := tensor.Try(f)
		require.ErrorIs(t, err, tensor.ErrDType, name)
		require.ErrorContains(t, err, "want a float dtype", name)
	}
}
