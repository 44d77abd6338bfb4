package ops

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTableIsComplete: every code has a row with a distinct name and
// formulas; a unary op's backward reads x, y or neither.
func TestTableIsComplete(t *testing.T) {
	names := map[string]bool{}
	for op := range NumUnary {
		u := Unaries[op]
		require.NotEmpty(t, u.Name, "unary code %d has no row", op)
		assert.NotEmpty(t, u.Forward, "%v", op)
		assert.NotEmpty(t, u.Backward, "%v", op)
		assert.LessOrEqual(t, u.Reads, ReadsY, "%v", op)
		assert.False(t, names[u.Name], "two ops named %s", u.Name)
		names[u.Name] = true
		assert.Equal(t, u.Name, op.String())
		x, y := op.BackwardUses()
		assert.Equal(t, u.Reads == ReadsX, x, "%v", op)
		assert.Equal(t, u.Reads == ReadsY, y, "%v", op)
	}
	for op := range NumBinary {
		b := Binaries[op]
		require.NotEmpty(t, b.Name, "binary code %d has no row", op)
		assert.NotEmpty(t, b.Forward, "%v", op)
		assert.False(t, names[b.Name], "two ops named %s", b.Name)
		names[b.Name] = true
		assert.Equal(t, b.Name, op.String())
	}
	assert.Equal(t, "UnaryOp(200)", UnaryOp(200).String())
	assert.Equal(t, "BinaryOp(9)", BinaryOp(9).String())
	x, y := UnaryOp(200).BackwardUses()
	assert.False(t, x || y)
	// cpukern's AVX2 loops (arith_amd64.s) take these codes.
	assert.Equal(t, []BinaryOp{0, 1, 2, 3}, []BinaryOp{Add, Sub, Mul, Div})
}
