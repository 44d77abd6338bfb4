package cuda

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestPriorityLevel checks the levels asked of the driver: CUDA numbers
// its priorities from least (0) down to greatest (-5 on an H200).
func TestPriorityLevel(t *testing.T) {
	for _, c := range []struct {
		least, greatest int32
		want            [3]int32 // Low, High, Highest
	}{
		{0, -5, [3]int32{0, -4, -5}},
		{0, -2, [3]int32{0, -1, -2}},
		{0, -1, [3]int32{0, -1, -1}}, // two levels: High is the greatest
		{0, 0, [3]int32{0, 0, 0}},    // one level
	} {
		for i, p := range []StreamPriority{PriorityLow, PriorityHigh, PriorityHighest} {
			assert.Equal(t, c.want[i], priorityLevel(p, c.least, c.greatest), "priority %d of range [%d, %d]", p, c.least, c.greatest)
		}
	}
}

// A priority that is none of the three constants is refused before any
// driver call, instead of silently becoming the least priority.
func TestNewStreamPriorityRefusesUnknown(t *testing.T) {
	c := fakeContext(t)
	before := DriverCalls()
	for _, p := range []StreamPriority{-1, PriorityHighest + 1, 7} {
		_, err := c.NewStreamPriority(p)
		requireArgError(t, err, "NewStreamPriority: unknown priority")
	}
	assert.Equal(t, uint64(0), DriverCalls()-before, "no driver call")
}
