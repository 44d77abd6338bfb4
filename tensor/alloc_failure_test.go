package tensor_test

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/memory/memtest"
	"github.com/strata-ml/strata/tensor"
)

// An op with several outputs that runs out of memory at its second or
// third allocation releases the ones it already made: the failure is an
// out-of-memory error and the bytes in use are as before, also outside
// any scope (where nothing else would free them).
func TestOutOfMemoryMidOpLeaksNothing(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	x := tensor.RandN(tensor.CPU(), tensor.Float32, rng, 1, 4, 8)
	w := tensor.RandN(tensor.CPU(), tensor.Float32, rng, 1, 8)
	q := tensor.RandN(tensor.CPU(), tensor.Float32, rng, 1, 2, 4, 8)
	a := tensor.RandN(tensor.CPU(), tensor.Float32, rng, 1, 4, 8)
	b := tensor.RandN(tensor.CPU(), tensor.Float32, rng, 1, 8, 3)
	tensor.Keep(x, w, q, a, b)
	defer func() {
		for _, k := range []*tensor.Tensor{x, w, q, a, b} {
			k.Release()
		}
	}()
	lnY, lnMean, lnRstd := tensor.LayerNorm(x, w, w, 1e-5)
	lnY.Release()
	out, lse := tensor.FusedCausalAttention(q, q, q, 0, 0, 0)
	tensor.Keep(lnMean, lnRstd, out, lse)
	defer func() {
		for _, k := range []*tensor.Tensor{lnMean, lnRstd, out, lse} {
			k.Release()
		}
	}()
	release := func(ts ...*tensor.Tensor) {
		for _, t := range ts {
			t.Release()
		}
	}
	ops := map[string]func(){ // each releases its outputs when it succeeds
		"LayerNorm":         func() { release(tensor.LayerNorm(x, w, w, 1e-5)) },
		"LayerNormBackward": func() { release(tensor.LayerNormBackward(x, x, lnMean, lnRstd, w, true)) },
		"FusedCausalAttention": func() {
			release(tensor.FusedCausalAttention(q, q, q, 0, 0, 0))
		},
		"FusedCausalAttentionBackward": func() {
			release(tensor.FusedCausalAttentionBackward(q, q, q, out, lse, out, 0, 0, 0))
		},
		"MatMulRowSums": func() { release(tensor.MatMulRowSums(a, b, tensor.MatMulMode{})) },
	}
	m := tensor.CPU().Memory()
	for name, op := range ops {
		t.Run(name, func(t *testing.T) {
			for n := int64(1); ; n++ {
				before := memtest.Settled(m)
				m.FailAllocation(n)
				err := tensor.Try(op)
				injected := m.FailAllocation(0)
				if injected == 0 { // the op made fewer than n allocations
					require.NoError(t, err)
					require.Greater(t, n, int64(2), "%s allocates more than once", name)
					return
				}
				require.ErrorIs(t, err, memory.ErrOutOfMemory, "allocation %d", n)
				assert.Equal(t, before, m.InUse(), "%s: bytes in use after its allocation %d failed", name, n)
			}
		})
	}
}
