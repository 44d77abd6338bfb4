package tokenizer

import (
	"fmt"
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

// badIDs is a tokenizer that breaks its contract: Encode returns ids
// outside [0, VocabSize).
type badIDs struct {
	Byte
	id int
}

func (b badIDs) Encode(text string) []int {
	ids := b.Byte.Encode(text)
	ids[len(ids)-1] = b.id
	return ids
}

// An id that is not in [0, VocabSize) is an error naming it, in chunks
// or whole, not an id narrowed to another (-1 was 65535, 65536 was 0).
func TestEncodeUint16RefusesBadIDs(t *testing.T) {
	text := []byte(strings.Repeat("abc\n", 100))
	for _, id := range []int{-1, 256, 1 << 16} {
		for _, chunk := range []int{7, 1 << 20} {
			_, err := encodeUint16(badIDs{id: id}, text, 2, chunk)
			require.EqualError(t, err, fmt.Sprintf("tokenizer: byte's Encode returned id %d, out of range [0, 256)", id), "chunks of %d", chunk)
		}
	}
}

// keeper is a tokenizer of another package that keeps the last text it
// encoded, as a tokenizer with a cache of pieces keeps its keys.
type keeper struct {
	Byte
	kept *string
}

func (k keeper) Encode(text string) []int {
	*k.kept = text
	return k.Byte.Encode(text)
}

// A tokenizer of another package may keep the strings it is given:
// EncodeUint16 gives it a copy of text, so that the caller reusing text
// afterwards does not change a string the tokenizer holds (it gave it
// text's own bytes, and the kept "hello" became "jello").
func TestEncodeUint16ForeignTokenizerKeepsItsString(t *testing.T) {
	var kept string
	text := []byte("hello")
	_, err := EncodeUint16(keeper{kept: &kept}, text, 1)
	require.NoError(t, err)
	text[0] = 'j'
	require.Equal(t, "hello", kept)
}

// panicky is a tokenizer of another package whose Encode panics.
type panicky struct{ Byte }

func (panicky) Encode(string) []int { panic("panicky: cannot encode") }

// A tokenizer's panic reaches EncodeUint16's caller, who can recover it;
// raised on the worker goroutine that encoded the text, it ended the
// program.
func TestEncodeUint16PanicReachesCaller(t *testing.T) {
	require.PanicsWithValue(t, "panicky: cannot encode", func() { _, _ = EncodeUint16(panicky{}, []byte("text"), 1) })
	require.PanicsWithValue(t, "panicky: cannot encode", func() { _, _ = EncodeUint16(panicky{}, []byte("text"), 0) })
}
