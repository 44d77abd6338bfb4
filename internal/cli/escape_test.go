package cli

import (
	"bytes"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPrintable: control characters and invalid bytes are escaped, new
// lines, tabs and printable text of any script stay.
func TestPrintable(t *testing.T) {
	require.Equal(t, "a\tb\nc \\x1b[31mred\\r\\x00\\x7f \\u009b\\xff 日本 🙂", Printable("a\tb\nc \x1b[31mred\r\x00\x7f \u009b\xff 日本 🙂"))
}

// TestEscaper: text streamed in pieces, a character split between them
// too, comes out as Printable makes it whole.
func TestEscaper(t *testing.T) {
	text := "héllo \x1b[2J 日本🙂\xffend\xe6"
	for size := 1; size <= 4; size++ {
		var out bytes.Buffer
		e := &Escaper{W: &out}
		for i := 0; i < len(text); i += size {
			n, err := e.Write([]byte(text[i:min(i+size, len(text))]))
			require.NoError(t, err)
			require.Equal(t, min(size, len(text)-i), n)
		}
		require.NoError(t, e.Flush())
		require.Equal(t, Printable(text), out.String(), "pieces of %d bytes", size)
	}
	f, err := os.Open("/dev/null")
	require.NoError(t, err)
	defer f.Close()
	require.True(t, IsTerminal(f), "a character device")
	require.False(t, IsTerminal(os.NewFile(^uintptr(0), "bad")))
}
