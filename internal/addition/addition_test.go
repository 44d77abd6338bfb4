package addition

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestProblem(t *testing.T) {
	p, a := Problem(3, 739, 931)
	assert.Equal(t, "739+931=", p)
	assert.Equal(t, "0761\n", a, "1670 reversed")
	p, a = Problem(3, 5, 7)
	assert.Equal(t, "005+007=", p)
	assert.Equal(t, "2100\n", a)
	assert.Equal(t, len(p)+len(a)-1, Tokens(3))
}

func TestHeldOutIsOneInTen(t *testing.T) {
	n := 0
	for x := range 1000 {
		for y := range 100 {
			if HeldOut(x, y) {
				n++
			}
		}
	}
	assert.InDelta(t, 10000, n, 300, "about a tenth of 100,000 problems")
	assert.Equal(t, HeldOut(123, 456), HeldOut(123, 456))
}
