package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"unicode/utf8"

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

// readTokenFile reads the bytes b of the token file path and checks them
// against tok.
func readTokenFile(path string, b []byte, tok tokenizer.Tokenizer) ([]uint16, string, error) {
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
	} else if looksLikeText(b[:min(len(b), textSample)]) {
		return nil, "", fmt.Errorf("-data %s: no llm.c header, and its first %d bytes look like text, not uint16 token ids (no NUL byte, nearly all printable or UTF-8): rename it to .txt, or give an llm.c or nanoGPT token file", path, min(len(b), textSample))
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

// textSample is how much of a .bin without llm.c's header looksLikeText
// reads.
const textSample = 64 << 10

// looksLikeText reports whether b reads as text rather than uint16 token
// ids: no NUL byte (every id below 256 has one, and GPT-2's common ids
// are) and at least 95% of the bytes printable ASCII, white space or
// valid UTF-8 (ids of 256 and above mostly have a control character for
// their high byte). A text named .bin used to train on the ids of its
// byte pairs.
func looksLikeText(b []byte) bool {
	if len(b) == 0 || bytes.IndexByte(b, 0) >= 0 {
		return false
	}
	texty := 0
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		switch {
		case r == utf8.RuneError && n <= 1 && len(b)-i < utf8.UTFMax && !utf8.FullRune(b[i:]):
			texty += len(b) - i // a character cut by the sample's end
			n = len(b) - i
		case r == utf8.RuneError && n <= 1:
		case r >= 0x20 && r != 0x7f || r == '\n' || r == '\r' || r == '\t' || r == '\f':
			texty += n
		}
		i += n
	}
	return texty >= len(b)*95/100
}
