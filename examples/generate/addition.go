package main

import (
	"cmp"
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/strata-ml/strata/internal/addition"
	"github.com/strata-ml/strata/internal/cli"
	"github.com/strata-ml/strata/nn"
	"github.com/strata-ml/strata/tokenizer"
)

// The addition task of train-gpt (examples/train-gpt/data.go): a problem is "a+b=" with a and b of -digits
// digits, zero-padded, and its answer the sum zero-padded to digits+1
// digits, written least-significant digit first, then a newline. One
// problem in ten, chosen by a hash of (a, b), is held out of training.
// The held-out rule and the problems' text are package addition's, shared
// with train-gpt, and the problems' random stream (PCG(11, 11), a and b
// drawn in [0, 10^digits)) is train-gpt's, so -addition 256 asks the
// problems train-gpt's evaluation asks, but each once (heldOutProblems).

// savedDigits is the addition task's digits per operand that the weights'
// metadata md records (train-gpt records its -digits when it trains on
// the task), or 0 when it records none from 1 to 6.
func savedDigits(md map[string]string) int {
	d, err := strconv.Atoi(md["digits"])
	if err != nil || d < 1 || d > 6 {
		return 0
	}
	return d
}

// settleDigits sets -digits to the digits the weights' metadata md
// records when it is not given (else to 3) and refuses a -digits that
// differs from them. It returns the recorded digits, 0 when none.
func settleDigits(o *options, md map[string]string) (int, error) {
	saved := savedDigits(md)
	if o.digits != 0 && saved != 0 && o.digits != saved {
		return 0, cli.Usagef("-digits %d disagrees with the file's metadata (%d-digit addition)", o.digits, saved)
	}
	o.digits = cmp.Or(o.digits, saved, 3)
	return saved, nil
}

// checkAddition refuses -addition for a model that cannot answer its
// problems: one whose tokenizer is not byte, or whose context is shorter
// than a problem of -digits digits. run checks it before loading the
// weights (the shape and the tokenizer come from the file's header).
func checkAddition(o *options, tok tokenizer.Tokenizer, context int) error {
	if tok.Name() != "byte" {
		return cli.Usagef("-addition: train-gpt's task is byte-level; -tokenizer is %s", tok.Name())
	}
	if n := addition.Tokens(o.digits); n > context {
		return cli.Usagef("-addition: a %d-digit problem is %d tokens, more than the model's context of %d", o.digits, n, context)
	}
	return nil
}

// heldOutProblems returns a function that draws the next held-out
// problem as train-gpt's evaluation does, but each problem once: its
// calls give the distinct problems of train-gpt's stream, in its order
// (its first n calls train-gpt's n problems when they hold no repeat, as
// for 3 digits and more they rarely do), so that -addition N's score is
// over N different problems. They are drawn one at a time as they are
// answered, so that -addition N holds one problem, not N (a billion did
// not fit the memory); the set of those asked is a bitmap of the pairs
// up to 4 digits (12.5 MB), else a map of those asked. It must not be
// called more than heldOutCount(digits) times (askedProblems caps N).
func heldOutProblems(digits int) func() (prompt, answer string) {
	max := pow10(digits)
	rng := rand.New(rand.NewPCG(11, 11))
	seen := newPairSet(max * max)
	return func() (string, string) {
		for {
			x, y := rng.IntN(max), rng.IntN(max)
			if addition.HeldOut(x, y) && seen.add(x*max+y) {
				return addition.Problem(digits, x, y)
			}
		}
	}
}

func pow10(digits int) int {
	n := 1
	for range digits {
		n *= 10
	}
	return n
}

// pairSet is a set of the pairs (x, y) of operands, as x*max+y below n.
type pairSet struct {
	bits []uint64
	m    map[int]struct{}
}

func newPairSet(n int) *pairSet {
	if n <= 100_000_000 {
		return &pairSet{bits: make([]uint64, (n+63)/64)}
	}
	return &pairSet{m: map[int]struct{}{}}
}

// add adds i and reports whether it was new.
func (s *pairSet) add(i int) bool {
	if s.bits != nil {
		w, b := i/64, uint64(1)<<(i%64)
		if s.bits[w]&b != 0 {
			return false
		}
		s.bits[w] |= b
		return true
	}
	if _, ok := s.m[i]; ok {
		return false
	}
	s.m[i] = struct{}{}
	return true
}

// heldOutCount is the number of distinct held-out problems of digits
// digits (about a tenth of the 10^(2*digits) pairs: 16 for 1 digit, 1006
// for 2, 99769 for 3).
func heldOutCount(digits int) int {
	max, n := pow10(digits), 0
	for x := range max {
		for y := range max {
			if addition.HeldOut(x, y) {
				n++
			}
		}
	}
	return n
}

// askedProblems is the number of problems -addition n asks: n, or every
// held-out problem once (capped) where there are fewer. They are
// counted only for n of at least a twentieth of the pairs: below, n is
// below the tenth of them held out (heldOutCount's counts up to 4
// digits; the hash's for more), and counting is not worth its time (6
// digits' 10^12 pairs take long; n that large takes longer).
func askedProblems(digits, n int) (asked, distinct int, capped bool) {
	max := pow10(digits)
	if n < max*max/20 {
		return n, 0, false
	}
	if distinct = heldOutCount(digits); n > distinct {
		return distinct, distinct, true
	}
	return n, distinct, false
}

// additionAccuracy answers -addition held-out problems greedily with the
// KV cache, one at a time, and prints the exact-match accuracy and the
// speed; unless -quiet, also the first three answers and up to five
// wrong ones. A result that cannot be written (a closed pipe, a full
// disk) stops it there.
func additionAccuracy(o *options, g *nn.GPT, tok tokenizer.Tokenizer, stdout, stderr io.Writer) error {
	if err := checkAddition(o, tok, g.Config.Context); err != nil {
		return err
	}
	n, distinct, capped := askedProblems(o.digits, o.addition)
	if n == 0 {
		return fmt.Errorf("-addition: %d-digit addition holds no problem out", o.digits)
	}
	if capped {
		fmt.Fprintf(stderr, "generate: -addition %d: %d-digit addition has only %d held-out problems: asking each once\n", o.addition, o.digits, distinct)
	}
	out := &cli.StickyWriter{W: stdout} // the results' writes, checked at the end
	stdout = out
	next := heldOutProblems(o.digits)
	right, tokens := 0, 0
	var wrong []string
	start := time.Now()
	for i := range n {
		p, answer := next()
		ids, err := g.Generate(nil, tok.Encode(p), nn.GenerateOptions{MaxNewTokens: len(answer), StopTokens: []int{'\n'}, Vocab: tok.VocabSize()})
		if err != nil {
			return fmt.Errorf("-addition: problem %q: %w", p, err)
		}
		tokens += len(ids)
		got, err := tok.Decode(ids)
		if err != nil {
			return err
		}
		if got == answer {
			right++
		} else if len(wrong) < 5 && !o.quiet {
			wrong = append(wrong, fmt.Sprintf("%s%s (want %s)", p, printable(got), printable(answer)))
		}
		if i < 3 && !o.quiet {
			fmt.Fprintf(stdout, "%s%s\n", p, printable(got))
			if out.Err != nil {
				return fmt.Errorf("-addition: writing the results to stdout: %w", out.Err)
			}
		}
	}
	elapsed := time.Since(start)
	all := ""
	if capped {
		all = ", every held-out problem"
	}
	fmt.Fprintf(stdout, "held-out accuracy: %d/%d = %.2f%% (%d-digit addition%s, answers reversed)\n", right, n, 100*float64(right)/float64(n), o.digits, all)
	for _, w := range wrong {
		fmt.Fprintf(stdout, "  wrong: %s\n", w)
	}
	if out.Err != nil {
		return fmt.Errorf("-addition: writing the results to stdout: %w", out.Err)
	}
	fmt.Fprintf(stderr, "generated %d tokens for %d problems in %v: %.1f tokens/s (prompt of %d tokens fed once per problem)\n",
		tokens, n, elapsed.Round(time.Millisecond), float64(tokens)/elapsed.Seconds(), 2*o.digits+2)
	return nil
}

// printable shows a newline and other control bytes escaped.
func printable(s string) string {
	q := strconv.Quote(s)
	return strings.ReplaceAll(q[1:len(q)-1], `\"`, `"`)
}
