package tokenizer

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestNewUnknown(t *testing.T) {
	_, err := New("bpe9000")
	require.ErrorContains(t, err, `unknown tokenizer "bpe9000"`)
	require.ErrorContains(t, err, "byte")
}

func TestByte(t *testing.T) {
	tok, err := New("byte")
	require.NoError(t, err)
	require.Equal(t, "byte", tok.Name())
	require.Equal(t, 256, tok.VocabSize())
	_, ok := tok.EOT()
	require.False(t, ok)
	for _, s := range []string{"", "hello", "héllo 世界 🙂", "\xff\xfe invalid", "<|endoftext|>"} {
		ids := tok.Encode(s)
		require.Len(t, ids, len(s))
		got, err := tok.Decode(ids)
		require.NoError(t, err)
		require.Equal(t, s, got)
	}
	require.Equal(t, []int{104, 105}, tok.Encode("hi"))
	_, err = tok.Decode([]int{1, 256})
	require.ErrorContains(t, err, "id 256 at position 1 is out of range")
	_, err = tok.Decode([]int{-1})
	require.ErrorContains(t, err, "id -1")
}
