package tensor

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// copyWords takes the widest words that the size and both addresses allow,
// and refuses what only bytes would copy.
func TestCopyWords(t *testing.T) {
	for _, c := range []struct {
		n         int
		dst, src  uintptr
		kb, words int
		ok        bool
	}{
		{64, 0x1000, 0x2000, kB8, 8, true},
		{64, 0x1004, 0x2000, kB4, 16, true},
		{6, 0x1000, 0x2000, kB2, 3, true},
		{64, 0x1000, 0x2002, kB2, 32, true},
		{7, 0x1000, 0x2000, 0, 0, false},
		{64, 0x1001, 0x2000, 0, 0, false},
		{0, 0x1000, 0x2000, 0, 0, false},
	} {
		kb, w, ok := copyWords(c.n, c.dst, c.src)
		require.Equal(t, [3]any{c.kb, c.words, c.ok}, [3]any{kb, w, ok}, "%+v", c)
	}
}
