package tensor_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/tensor"
)

// Fused attention with head dimension 0 is refused with an *OpError
// wrapping ErrShape before anything is allocated: its output is empty, so
// the kernel never ran and lse (the log-sum-exp over scores that do not
// exist) came back uninitialised.
func TestFusedAttentionRefusesZeroHeadDim(t *testing.T) {
	tensor.WithScope(func() {
		f32 := tensor.Float32
		q := tensor.Zeros(cpu, f32, 2, 3, 0)      // (bh, T, hd 0)
		lse := tensor.Zeros(cpu, f32, 2, 3)       // (bh, T)
		qkv := tensor.Zeros(cpu, f32, 1, 3, 0)    // (B, T, 3C), C 0
		qkvLse := tensor.Zeros(cpu, f32, 1, 1, 3) // (B, heads, T)
		ops := map[string]func(){
			"FusedCausalAttention":            func() { tensor.FusedCausalAttention(q, q, q, 0, 0, 0) },
			"FusedCausalAttentionBackward":    func() { tensor.FusedCausalAttentionBackward(q, q, q, q, lse, q, 0, 0, 0) },
			"FusedCausalAttentionQKV":         func() { tensor.FusedCausalAttentionQKV(qkv, 1, 0, 0, 0) },
			"FusedCausalAttentionQKVBackward": func() { tensor.FusedCausalAttentionQKVBackward(qkv, qkv, qkvLse, qkv, 1, 0, 0, 0) },
		}
		m := cpu.Memory()
		for name, op := range ops {
			m.FailAllocation(1) // an allocation would fail as out of memory
			err := tensor.Try(op)
			injected := m.FailAllocation(0)
			var oe *tensor.OpError
			require.ErrorAs(t, err, &oe, name)
			require.Equal(t, name, oe.Op)
			require.ErrorIs(t, err, tensor.ErrShape, name)
			require.Contains(t, err.Error(), "head dimension 0", name)
			require.Zero(t, injected, "%s allocated before refusing", name)
		}
	})
}
