package memory_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/strata-ml/strata/memory"
)

// TestFormatBytesRoundsIntoTheNextUnit: a count just under a unit, whose
// two decimals round up to 1024, is written in that unit ("1.00 MiB"),
// not as "1024.00 KiB"; one that stays under it keeps the smaller unit.
func TestFormatBytesRoundsIntoTheNextUnit(t *testing.T) {
	for n, want := range map[int64]string{
		MiB - 1:       "1.00 MiB",
		MiB - 5:       "1.00 MiB", // 1023.995 KiB
		MiB - 6:       "1023.99 KiB",
		GiB - 1:       "1.00 GiB",
		1<<40 - 1:     "1.00 TiB",
		1<<60 - 1:     "1.00 EiB",
		-(MiB - 1):    "-1.00 MiB",
		1<<63 - 1:     "8.00 EiB", // the largest unit takes any count
		1<<20 + 1<<19: "1.50 MiB",
	} {
		assert.Equal(t, want, memory.FormatBytes(n), "FormatBytes(%d)", n)
	}
}
