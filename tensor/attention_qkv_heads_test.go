package tensor_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/tensor"
)

// TestFusedAttentionQKVHugeHeads: a head count whose 3*heads wraps around
// int (here to 2, which divides 3C = 6) is refused by the QKV ops
// themselves with ErrShape naming the heads. Before, the wrapped product
// passed the check, the head size came out 0, and the error was
// Reshape's, of a shape the caller never asked for.
func TestFusedAttentionQKVHugeHeads(t *testing.T) {
	const heads = 6148914691236517206 // 3*heads = 2^64 + 2
	tensor.WithScope(func() {
		qkv := tensor.Zeros(tensor.CPU(), tensor.Float32, 1, 2, 6)
		y := tensor.Zeros(tensor.CPU(), tensor.Float32, 1, 2, 2)
		for op, f := range map[string]func(){
			"FusedCausalAttentionQKV":         func() { tensor.FusedCausalAttentionQKV(qkv, heads, 0, 0, 0) },
			"FusedCausalAttentionQKVBackward": func() { tensor.FusedCausalAttentionQKVBackward(qkv, y, y, y, heads, 0, 0, 0) },
		} {
			err := tensor.Try(f)
			require.ErrorIs(t, err, tensor.ErrShape, op)
			requireOpError(t, err, op)
			require.ErrorContains(t, err, "6148914691236517206 heads", op)
		}
	})
}
