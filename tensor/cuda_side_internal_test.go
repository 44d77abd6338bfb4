package tensor

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// balancedGrid takes the rows in as few rounds as width blocks would, each
// block running the same number of rows or one fewer.
func TestBalancedGrid(t *testing.T) {
	for _, c := range []struct{ n, width, want int }{
		{0, 33, 1}, {1, 33, 1}, {33, 33, 33}, {34, 33, 17}, {66, 33, 33}, {67, 33, 23}, {200, 33, 29}, {200, 1, 1},
	} {
		got := balancedGrid(c.n, c.width)
		assert.Equal(t, c.want, got, "%d rows, width %d", c.n, c.width)
		if c.n > 0 {
			rounds := ceilDiv(c.n, got)
			assert.Equal(t, ceilDiv(c.n, min(c.n, c.width)), rounds, "%d rows, width %d: the rounds of width blocks", c.n, c.width)
			last := c.n - got*(rounds-1) // the blocks busy in the last round
			assert.Greater(t, last, got-rounds, "%d rows, width %d: %d of %d blocks busy in the last round", c.n, c.width, last, got)
		}
	}
}
