package tokenizer

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// A GPT2 not made by New (the zero value, or a nil *GPT2 in a Tokenizer)
// is the built-in tokenizer, as its doc says: Encode, Decode,
// EncodeParallel and EncodeUint16 give New("gpt2")'s results. They used
// to panic ("maphash: use of uninitialized Seed", a nil dereference), and
// EncodeUint16 crashed the program from one of its goroutines, where no
// recover reaches.
func TestGPT2ZeroValue(t *testing.T) {
	tok, err := New("gpt2")
	require.NoError(t, err)
	text := "Hello, world! ünïcödé\n\xff 'll"
	want := tok.Encode(text)
	var nilGPT2 *GPT2
	for name, g := range map[string]*GPT2{"zero value": {}, "nil pointer": nilGPT2} {
		require.Equal(t, want, g.Encode(text), name)
		s, err := g.Decode(want)
		require.NoError(t, err, name)
		require.Equal(t, text, s, name)
		_, err = g.Decode([]int{gpt2Vocab})
		require.EqualError(t, err, "tokenizer gpt2: id 50257 at position 0 is out of range [0, 50257)", name)
		require.Equal(t, want, EncodeParallel(g, text, 2), name)
		ids, err := EncodeUint16(g, []byte(text), 2)
		require.NoError(t, err, name)
		require.Len(t, ids, len(want), name)
		for i, id := range want {
			require.EqualValues(t, id, ids[i], name)
		}
	}
}
