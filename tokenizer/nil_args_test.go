package tokenizer

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// A nil Tokenizer is an error naming the argument (returned by
// EncodeUint16, a panic of EncodeParallel, which returns none), not a
// nil dereference.
func TestNilTokenizer(t *testing.T) {
	_, err := EncodeUint16(nil, []byte("some text"), 1)
	require.EqualError(t, err, "tokenizer: EncodeUint16: nil Tokenizer tok")
	_, err = EncodeUint16(nil, nil, 1)
	require.EqualError(t, err, "tokenizer: EncodeUint16: nil Tokenizer tok", "an empty text too")
	require.PanicsWithError(t, "tokenizer: EncodeParallel: nil Tokenizer tok", func() { EncodeParallel(nil, "some text", 1) })
	require.PanicsWithError(t, "tokenizer: EncodeParallel: nil Tokenizer tok", func() { EncodeParallel(nil, "", 0) })
}
