package main

import (
	"encoding/binary"
	"fmt"

	"github.com/strata-ml/strata/tokenizer"
)

// Token files (-data FILE.bin): token ids already, as llm.c and nanoGPT
// write them.
//
//   - llm.c: a header of 256 little-endian int32 (header[0] the magic
//     20240520, header[1] the version, 1 for GPT-2's uint16 tokens,
//     header[2] the number of tokens), then the tokens as little-endian
//     uint16.
//   - nanoGPT (prepare.py's train.bin and val.bin): the tokens as
//     little-endian uint16, no header.
//
// A file whose first int32 is the magic is read as llm.c's, anything else
// as nanoGPT's. Every id must be below the tokenizer's vocabulary size.
const (
	llmcMagic       = 20240520
	llmcHeaderBytes = 256 * 4
)

// readTokenFile reads a token file and checks it against tok.
func readTokenFile(path string, tok tokenizer.Tokenizer) ([]uint16, string, error) {
	b, err := readData(path)
	if err != nil {
		return nil, "", err
	}
	what := "nanoGPT token file (uint16, no header)"
	body := b
	if len(b) >= 4 && binary.LittleEndian.Uint32(b) == llmcMagic {
		if len(b) < llmcHeaderBytes {
			return nil, "", fmt.Errorf("-data %s: an llm.c token file (magic %d) of %d bytes, shorter than its %d-byte header", path, llmcMagic, len(b), llmcHeaderBytes)
		}
		switch v := int32(binary.LittleEndian.Uint32(b[4:])); v {
		case 1:
		case 2:
			return nil, "", fmt.Errorf("-data %s: llm.c token file version 2 (LLaMA 3's uint32 tokens) is not supported: want version 1 (uint16 tokens)", path)
		default:
			return nil, "", fmt.Errorf("-data %s: llm.c token file of unknown version %d: want version 1 (uint16 tokens)", path, v)
		}
		n := int64(int32(binary.LittleEndian.Uint32(b[8:])))
		if got := int64(len(b) - llmcHeaderBytes); n < 0 || got != 2*n {
			return nil, "", fmt.Errorf("-data %s: the llm.c header says %d tokens (%d bytes after the %d-byte header), the file has %d bytes after it", path, n, 2*n, llmcHeaderBytes, got)
		}
		what = "llm.c token file, version 1"
		body = b[llmcHeaderBytes:]
	} else if len(b)%2 != 0 {
		return nil, "", fmt.Errorf("-data %s: %d bytes, an odd number: not a token file (llm.c's start with the magic %d; nanoGPT's are uint16 tokens, 2 bytes each)", path, len(b), llmcMagic)
	}
	ids := make([]uint16, len(body)/2)
	V := tok.VocabSize()
	for i := range ids {
		id := binary.LittleEndian.Uint16(body[2*i:])
		if int(id) >= V {
			hint := ""
			if tok.Name() == "byte" {
				hint = " (GPT-2 tokens? use -tokenizer gpt2)"
			}
			return nil, "", fmt.Errorf("-data %s: token %d at position %d is outside -tokenizer %s's vocabulary of %d ids%s", path, id, i, tok.Name(), V, hint)
		}
		ids[i] = id
	}
	return ids, what, nil
}

// encodeText tokenizes a text file's contents on every core.
func encodeText(tok tokenizer.Tokenizer, text string) []int {
	return tokenizer.EncodeParallel(tok, text, 0)
}
