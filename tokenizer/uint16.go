package tokenizer

import (
	"fmt"
	"unsafe"
)

// EncodeUint16 is EncodeParallel of a text held as bytes, with the ids
// as uint16, for a corpus: with this package's tokenizers it reads text
// in place (no copy into a string; text must not change during the
// call), and a tokenizer of another package, which may keep the strings
// it is given, encodes a copy; it narrows each
// chunk's ids as soon as the chunk is encoded, so that a long text costs
// 2 bytes a token, not the 8 of an int, twice over (the chunks' ids and
// their concatenation). It refuses a nil tokenizer and one of more than
// 65536 ids, and returns an error for an id Encode gives outside
// [0, VocabSize) (a tokenizer of another package that breaks its
// contract) rather than narrow it to another id.
func EncodeUint16(tok Tokenizer, text []byte, workers int) ([]uint16, error) {
	if tok == nil {
		return nil, fmt.Errorf("tokenizer: EncodeUint16: nil Tokenizer tok")
	}
	return encodeUint16(tok, text, workers, 1<<20)
}

func encodeUint16(tok Tokenizer, text []byte, workers, chunk int) ([]uint16, error) {
	vocab := tok.VocabSize()
	if vocab > 1<<16 {
		return nil, fmt.Errorf("tokenizer: %s's %d ids do not fit in uint16", tok.Name(), vocab)
	}
	if len(text) == 0 {
		return []uint16{}, nil
	}
	parts := chunks(tok, inPlace(tok, text), chunk)
	out := make([][]uint16, len(parts))
	bad := make([]error, len(parts))
	each(len(parts), workers, func(i int) { out[i], bad[i] = narrow(tok, vocab, tok.Encode(parts[i])) })
	for _, err := range bad {
		if err != nil {
			return nil, err // the first chunk's
		}
	}
	if len(out) == 1 {
		return out[0], nil
	}
	n := 0
	for _, o := range out {
		n += len(o)
	}
	ids := make([]uint16, 0, n)
	for i, o := range out {
		ids = append(ids, o...)
		out[i] = nil
	}
	return ids, nil
}

// narrow is ids as uint16, or an error naming the first id outside
// [0, vocab) (vocab <= 65536: EncodeUint16 checked it).
func narrow(tok Tokenizer, vocab int, ids []int) ([]uint16, error) {
	out := make([]uint16, len(ids))
	for i, id := range ids {
		if id < 0 || id >= vocab {
			return nil, fmt.Errorf("tokenizer: %s's Encode returned id %d, out of range [0, %d)", tok.Name(), id, vocab)
		}
		out[i] = uint16(id)
	}
	return out, nil
}

// inPlace is text as a string for tok.Encode: text itself where tok is
// one of this package's tokenizers, which keep nothing of the strings
// they encode, else a copy. A tokenizer of another package may keep them
// (a cache of pieces, as many BPE encoders have), and a string over
// text's bytes would change under it when the caller reuses text after
// the call: its cache would hold keys that no longer say what they did.
func inPlace(tok Tokenizer, text []byte) string {
	switch tok.(type) {
	case Byte, *GPT2:
		return unsafe.String(unsafe.SliceData(text), len(text))
	}
	return string(text)
}
