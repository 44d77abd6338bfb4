package main

import (
	"fmt"

	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/tokenizer"
)

// Loading -data holds the whole file and its token ids (uint16) in
// memory at once. Measured peaks beyond the rest of the program, for a
// 20 MB file: text with -tokenizer byte 2.5 times its size (the bytes
// and a uint16 a byte); text with gpt2 3.9 times (source code and prose,
// about 2.5 bytes a token) up to 8.3 times (random bytes, about a token a
// byte; the chunks' ids, their concatenation and the garbage collector's
// slack); a .bin token file 2 times.

// dataNeed is the memory loading a -data file of size bytes needs, as
// the factors above bound it without the collector's slack: the bytes,
// then 2 bytes a token for a token file and a byte-tokenized text, 4
// bytes a token (at most one a byte) for gpt2's.
func dataNeed(size int64, tok tokenizer.Tokenizer, bin bool) int64 {
	switch {
	case bin:
		return 2 * size
	case tok.Name() == "byte":
		return 3 * size
	}
	return 5 * size
}

// checkDataMemory refuses a -data file whose need (dataNeed) passes the
// host memory budget b (options.hostBudget: memory.DefaultHostBudget, the
// CPU device's): the kernel would kill the process while it reads the
// file, with no message. No budget (nil: STRATA_HOST_MEMORY=off), no
// check.
func checkDataMemory(path string, size int64, tok tokenizer.Tokenizer, bin bool, b *memory.HostBudget) error {
	need := dataNeed(size, tok, bin)
	if b == nil || need <= b.Limit() {
		return nil
	}
	how, hint := "a token file", "use a smaller file"
	if !bin {
		how, hint = "text tokenized with -tokenizer "+tok.Name(), "use a smaller file, or tokenize it once into a token file (.bin)"
	}
	return fmt.Errorf("-data %s: %s as %s needs about %s of memory to load, more than the %s: %s",
		path, memory.FormatBytes(size), how, memory.FormatBytes(need), b, hint)
}
