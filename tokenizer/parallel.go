package tokenizer

import (
	"runtime"
	"sync"
)

// EncodeParallel returns tok.Encode(text), computed on up to workers
// goroutines (0: GOMAXPROCS) for a long text: the text is cut into chunks
// of about 1 MiB at places where encoding the parts gives the same ids as
// encoding the whole, and the chunks are encoded concurrently.
//
// For the byte tokenizer any place will do. For gpt2 a cut goes after a
// newline that stands alone between two ASCII characters that are not
// white space ("x\ny"): no piece of GPT-2's pattern crosses it, and the
// newline is a piece of its own whether or not the text ends there. A
// text without such a place is encoded whole. Tokenizers of other
// packages are encoded whole.
func EncodeParallel(tok Tokenizer, text string, workers int) []int {
	return encodeParallel(tok, text, workers, 1<<20)
}

func encodeParallel(tok Tokenizer, text string, workers, chunk int) []int {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	var cut func(s string, from int) int
	switch tok.(type) {
	case Byte:
		cut = func(s string, from int) int { return from }
	case *GPT2:
		cut = gpt2Cut
	}
	if cut == nil || workers == 1 || len(text) < 2*chunk {
		return tok.Encode(text)
	}
	var parts []string
	for len(text) > 0 {
		end := len(text)
		if chunk < len(text) {
			end = cut(text, chunk)
		}
		parts = append(parts, text[:end])
		text = text[end:]
	}
	out := make([][]int, len(parts))
	next := make(chan int, len(parts))
	for i := range parts {
		next <- i
	}
	close(next)
	var wg sync.WaitGroup
	for range min(workers, len(parts)) {
		wg.Go(func() {
			for i := range next {
				out[i] = tok.Encode(parts[i])
			}
		})
	}
	wg.Wait()
	n := 0
	for _, o := range out {
		n += len(o)
	}
	ids := make([]int, 0, n)
	for _, o := range out {
		ids = append(ids, o...)
	}
	return ids
}

// gpt2Cut returns the first place at or after from (and after the first
// byte) that GPT-2's pattern never crosses and where its pieces do not
// depend on what follows: just after "x\n" where x and the next byte are
// ASCII and not white space; len(s) if there is none.
func gpt2Cut(s string, from int) int {
	for p := max(from, 2); p < len(s); p++ {
		if s[p-1] == '\n' && asciiSolid(s[p-2]) && asciiSolid(s[p]) {
			return p
		}
	}
	return len(s)
}

func asciiSolid(c byte) bool { return c < 0x80 && asciiClass[c] != classSpace }
