package tokenizer

import (
	"fmt"
	"unsafe"
)

// EncodeUint16 is EncodeParallel of a text held as bytes, with the ids
// as uint16, for a corpus: it reads text in place (no copy into a
// string; text must not change during the call) and narrows each
// chunk's ids as soon as the chunk is encoded, so that a long text costs
// 2 bytes a token, not the 8 of an int, twice over (the chunks' ids and
// their concatenation). It refuses a nil tokenizer and one of more than
// 65536 ids.
func EncodeUint16(tok Tokenizer, text []byte, workers int) ([]uint16, error) {
	if tok == nil {
		return nil, fmt.Errorf("tokenizer: EncodeUint16: nil Tokenizer tok")
	}
	return encodeUint16(tok, text, workers, 1<<20)
}

func encodeUint16(tok Tokenizer, text []byte, workers, chunk int) ([]uint16, error) {
	if v := tok.VocabSize(); v > 1<<16 {
		return nil, fmt.Errorf("tokenizer: %s's %d ids do not fit in uint16", tok.Name(), v)
	}
	if len(text) == 0 {
		return []uint16{}, nil
	}
	parts := chunks(tok, unsafe.String(unsafe.SliceData(text), len(text)), chunk)
	out := make([][]uint16, len(parts))
	each(len(parts), workers, func(i int) { out[i] = narrow(tok.Encode(parts[i])) })
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

// narrow is ids as uint16 (each below 65536: EncodeUint16 checked the
// vocabulary).
func narrow(ids []int) []uint16 {
	out := make([]uint16, len(ids))
	for i, id := range ids {
		out[i] = uint16(id)
	}
	return out
}
