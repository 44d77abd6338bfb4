package tokenizer

import (
	"errors"
	"runtime"
	"slices"
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
// packages are encoded whole. A nil tok panics with an error saying so.
func EncodeParallel(tok Tokenizer, text string, workers int) []int {
	if tok == nil {
		panic(errors.New("tokenizer: EncodeParallel: nil Tokenizer tok"))
	}
	return encodeParallel(tok, text, workers, 1<<20)
}

func encodeParallel(tok Tokenizer, text string, workers, chunk int) []int {
	parts := chunks(tok, text, chunk)
	if len(parts) < 2 || workers == 1 {
		return tok.Encode(text)
	}
	out := make([][]int, len(parts))
	each(len(parts), workers, func(i int) { out[i] = tok.Encode(parts[i]) })
	return slices.Concat(out...)
}

// chunks cuts text into parts of about chunk bytes that encode as the
// whole does (EncodeParallel), or returns it whole when tok is not one of
// this package's or the text is shorter than two chunks.
func chunks(tok Tokenizer, text string, chunk int) []string {
	var cut func(s string, from int) int
	switch tok.(type) {
	case Byte:
		cut = func(s string, from int) int { return from }
	case *GPT2:
		cut = gpt2Cut
	}
	if cut == nil || len(text) < 2*chunk {
		return []string{text}
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
	return parts
}

// each calls f(i) for i in [0, n) on up to workers goroutines (0:
// GOMAXPROCS). A panic of f (a tokenizer of another package failing on
// its text) is raised again on the caller's goroutine once the workers
// are done, where the caller can recover it: raised on a worker's, it
// would end the program.
func each(n, workers int, f func(i int)) {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	next := make(chan int, n)
	for i := range n {
		next <- i
	}
	close(next)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first any // the first panic's value
	)
	for range min(workers, n) {
		wg.Go(func() {
			defer func() {
				if p := recover(); p != nil {
					mu.Lock()
					if first == nil {
						first = p
					}
					mu.Unlock()
				}
			}()
			for i := range next {
				f(i)
			}
		})
	}
	wg.Wait()
	if first != nil {
		panic(first)
	}
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
