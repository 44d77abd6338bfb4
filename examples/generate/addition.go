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
// problems train-gpt's evaluation asks.

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
// problem as train-gpt's evaluation does: its first n calls give the n
// problems train-gpt asks. They are drawn one at a time as they are
// answered, so that -addition N holds one problem, not N (a billion did
// not fit the memory).
func heldOutProblems(digits int) func() (prompt, answer string) {
	max := 1
	for range digits {
		max *= 10
	}
	rng := rand.New(rand.NewPCG(11, 11))
	return func() (string, string) {
		for {
			x, y := rng.IntN(max), rng.IntN(max)
			if addition.HeldOut(x, y) {
				return addition.Problem(digits, x, y)
			}
		}
	}
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
	out := &cli.StickyWriter{W: stdout} // the results' writes, checked at the end
	stdout = out
	next := heldOutProblems(o.digits)
	right, tokens := 0, 0
	var wrong []string
	start := time.Now()
	for i := range o.addition {
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
	fmt.Fprintf(stdout, "held-out accuracy: %d/%d = %.2f%% (%d-digit addition, answers reversed)\n", right, o.addition, 100*float64(right)/float64(o.addition), o.digits)
	for _, w := range wrong {
		fmt.Fprintf(stdout, "  wrong: %s\n", w)
	}
	if out.Err != nil {
		return fmt.Errorf("-addition: writing the results to stdout: %w", out.Err)
	}
	fmt.Fprintf(stderr, "generated %d tokens for %d problems in %v: %.1f tokens/s (prompt of %d tokens fed once per problem)\n",
		tokens, o.addition, elapsed.Round(time.Millisecond), float64(tokens)/elapsed.Seconds(), 2*o.digits+2)
	return nil
}

// printable shows a newline and other control bytes escaped.
func printable(s string) string {
	q := strconv.Quote(s)
	return strings.ReplaceAll(q[1:len(q)-1], `\"`, `"`)
}
