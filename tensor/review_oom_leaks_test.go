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

// Ops that make temporaries (contiguous copies of strided operands, the
// passes of a reduction over several axes, a float32 result to round to
// a half dtype) release them, and their outputs, when a later allocation
// runs out of memory: outside any scope nothing else would free them
// (the bytes stayed in use until the garbage collector's safety net found
// the tensors). TestOutOfMemoryMidOpLeaksNothing covers the ops with
// several outputs; these are the ones that leaked.
func TestOutOfMemoryMidOpReleasesTemporaries(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	x := tensor.RandN(cpu, tensor.Float32, rng, 1, 3, 4, 5)
	sq := tensor.RandN(cpu, tensor.Float32, rng, 1, 2, 4, 4)
	qkv := tensor.RandN(cpu, tensor.Float32, rng, 1, 2, 4, 12)
	wide := tensor.RandN(cpu, tensor.Float32, rng, 1, 5, 12)
	row := tensor.RandN(cpu, tensor.Float32, rng, 1, 1, 4)
	bias := tensor.RandN(cpu, tensor.Float32, rng, 1, 3)
	tensor.Keep(x, sq, qkv, wide, row, bias)
	defer releaseAll(x, sq, qkv, wide, row, bias)

	q := x.Transpose(1, 2) // (3, 5, 4), strided: every op below copies it
	out, lse := tensor.FusedCausalAttention(q, q, q, 0, 0, 0)
	y, ylse := tensor.FusedCausalAttentionQKV(qkv, 2, 0, 0, 0)
	tensor.Keep(q, out, lse, y, ylse)
	defer releaseAll(q, out, lse, y, ylse)
	a := row.Expand(3, 4) // (3, 4) broadcast rows: no GEMM layout, copied
	bn := wide.Narrow(1, 0, 4)
	bt := bn.T()
	b := bt.Narrow(1, 0, 3) // (4, 3) strided: copied too
	releaseAll(bn, bt)
	xt := x.Transpose(0, 2)   // (5, 4, 3)
	sqt := sq.Transpose(1, 2) // (2, 4, 4)
	tensor.Keep(a, b, xt, sqt)
	defer releaseAll(a, b, xt, sqt)

	ops := map[string]func(){ // each releases what it returns when it succeeds
		"Sum":         func() { releaseAll(tensor.Sum(xt, false, 0, 1)) },
		"SumAll":      func() { releaseAll(tensor.Sum(x, false)) },
		"Mean":        func() { releaseAll(tensor.Mean(xt, true, 0, -1)) },
		"Max":         func() { releaseAll(tensor.Max(xt, false, 0, 1)) },
		"SumTo":       func() { releaseAll(tensor.SumTo(xt, []int{1, 4, 1})) },
		"Concat":      func() { releaseAll(tensor.Concat(1, q, q)) },
		"SoftmaxBack": func() { releaseAll(tensor.SoftmaxBackward(q, q, true)) },
		"CausalSoftmaxBackward": func() {
			releaseAll(tensor.CausalSoftmaxBackward(sqt, sqt))
		},
		"UnaryTo": func() { releaseAll(tensor.UnaryTo(tensor.OpGelu, q, tensor.BFloat16)) },
		"UnaryBackwardTo": func() {
			releaseAll(tensor.UnaryBackwardTo(tensor.OpGelu, q, nil, q, tensor.Float16))
		},
		"FusedCausalAttention": func() { releaseAll(tensor.FusedCausalAttention(q, q, q, 0, 0, 0)) },
		"FusedCausalAttentionBackward": func() {
			releaseAll(tensor.FusedCausalAttentionBackward(q, q, q, out, lse, out, 0, 0, 0))
		},
		"FusedCausalAttentionQKV": func() { releaseAll(tensor.FusedCausalAttentionQKV(qkv, 2, 0, 0, 0)) },
		"FusedCausalAttentionQKVBackward": func() {
			releaseAll(tensor.FusedCausalAttentionQKVBackward(qkv, y, ylse, y, 2, 0, 0, 0))
		},
		"MatMulBias":    func() { releaseAll(tensor.MatMulBias(a, b, bias, tensor.MatMulMode{})) },
		"MatMulRowSums": func() { releaseAll(tensor.MatMulRowSums(a, b, tensor.MatMulMode{})) },
	}
	m := cpu.Memory()
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

func releaseAll(ts ...*tensor.Tensor) {
	for _, t := range ts {
		t.Release()
	}
}
