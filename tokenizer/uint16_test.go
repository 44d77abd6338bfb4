package tokenizer

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// fakeWide is a tokenizer of more ids than uint16 holds.
type fakeWide struct{ Byte }

func (fakeWide) VocabSize() int { return 1<<16 + 1 }

// EncodeUint16 equals Encode, in chunks or whole, and refuses a
// tokenizer whose ids do not fit.
func TestEncodeUint16(t *testing.T) {
	text := []byte(strings.Repeat("Hello, world!\nx = 1 + 2;\n  indented\tline ünïcödé 🙂\n", 300))
	for _, name := range Names() {
		tok, err := New(name)
		require.NoError(t, err)
		want := tok.Encode(string(text))
		for _, chunk := range []int{1, 7, 100, 4096, 1 << 20} {
			got, err := encodeUint16(tok, text, 3, chunk)
			require.NoError(t, err)
			require.Len(t, got, len(want), "%s, chunks of %d", name, chunk)
			for i, id := range want {
				if int(got[i]) != id {
					t.Fatalf("%s, chunks of %d: id %d is %d, want %d", name, chunk, i, got[i], id)
				}
			}
		}
		got, err := EncodeUint16(tok, nil, 0)
		require.NoError(t, err)
		require.Empty(t, got)
	}
	_, err := EncodeUint16(fakeWide{}, text, 0)
	require.EqualError(t, err, "tokenizer: byte's 65537 ids do not fit in uint16")
}
