// Package tokenizer turns text into token ids and back.
//
// Two tokenizers are built in, both offline: "byte" (256 ids, one per
// byte: any text, no vocabulary file) and "gpt2" (GPT-2's byte-level BPE,
// the encoding tiktoken calls r50k_base or "gpt2": 50257 ids, 50256 being
// <|endoftext|>). New returns one by name.
//
// Encode never fails: every string has an encoding, and special tokens
// such as "<|endoftext|>" in the text are encoded as plain text (use EOT
// to insert the end-of-text id). Decode returns an error for an id out of
// range. Decode(Encode(s)) == s for every string s, valid UTF-8 or not.
//
// For long texts, EncodeParallel gives Encode's ids computed on several
// goroutines: the text is cut into chunks of about 1 MiB where encoding
// the parts gives the same ids as encoding the whole. EncodeUint16 does
// the same for a corpus held as []byte (read in place by this package's
// tokenizers, copied for others, which may keep it) and returns the
// ids as uint16, 2 bytes a token; it refuses a nil tokenizer and one of
// more than 65536 ids.
package tokenizer

import (
	"fmt"
	"sort"
	"strings"
)

// Tokenizer maps text to token ids and back. Its methods are safe for
// concurrent use.
type Tokenizer interface {
	// Name is the name New knows it by.
	Name() string
	// VocabSize is the number of ids: every id Encode returns is in
	// [0, VocabSize).
	VocabSize() int
	// Encode returns the ids of text; special tokens in text are plain
	// text.
	Encode(text string) []int
	// Decode returns the text of ids, or an error naming the first id
	// out of range.
	Decode(ids []int) (string, error)
	// EOT returns the end-of-text id, if the tokenizer has one.
	EOT() (int, bool)
}

// constructors holds the built-in tokenizers by name.
var constructors = map[string]func() (Tokenizer, error){
	"byte": func() (Tokenizer, error) { return Byte{}, nil },
}

// Names lists the names New accepts, sorted.
func Names() []string {
	n := make([]string, 0, len(constructors))
	for k := range constructors {
		n = append(n, k)
	}
	sort.Strings(n)
	return n
}

// New returns the tokenizer called name, or an error listing the known
// names. The gpt2 tokenizer's tables are built once, on first use.
func New(name string) (Tokenizer, error) {
	c, ok := constructors[name]
	if !ok {
		return nil, fmt.Errorf("tokenizer: unknown tokenizer %q (known: %s)", name, strings.Join(Names(), ", "))
	}
	return c()
}

// Byte is the byte tokenizer: id i is byte i. It has no end-of-text
// token.
type Byte struct{}

func (Byte) Name() string     { return "byte" }
func (Byte) VocabSize() int   { return 256 }
func (Byte) EOT() (int, bool) { return 0, false }

func (Byte) Encode(text string) []int {
	ids := make([]int, len(text))
	for i := 0; i < len(text); i++ {
		ids[i] = int(text[i])
	}
	return ids
}

func (Byte) Decode(ids []int) (string, error) {
	b := make([]byte, len(ids))
	for i, id := range ids {
		if id < 0 || id > 255 {
			return "", fmt.Errorf("tokenizer byte: id %d at position %d is out of range [0, 256)", id, i)
		}
		b[i] = byte(id)
	}
	return string(b), nil
}
