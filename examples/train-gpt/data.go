package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/internal/addition"
	"github.com/strata-ml/strata/internal/cli"
	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/tokenizer"
)

// The built-in task is bytes (its prompts and answers are ASCII); text
// and token files use -tokenizer (byte by default: any text file works
// with the 256-wide vocabulary of the presets tiny and char).

// dataset yields training batches and knows how to evaluate a model.
type dataset interface {
	// seqLen is the length of the training rows for a model of the given
	// context, or an error when the data needs more.
	seqLen(context int) (int, error)
	// batch fills x and y (B*T each, row-major) with one training batch.
	batch(rng *rand.Rand, x, y []int32, B, T int)
	describe() string
}

// additionTask is the default data: problems "a+b=c" with n-digit a and
// b, the answer c written least-significant digit first (so each answer
// digit depends only on digits already seen) and ended by a newline, one
// problem per row of the batch, starting at position 0 as the prompts of
// the evaluation do (rows of several packed problems made the model learn
// the sum at every offset, which 4000 steps did not always manage: some
// seeds plateaued with the answers right at some offsets only). Only the
// answer digits and the newline are trained on (the question is random:
// other targets get autograd.IgnoreIndex). One problem in ten, chosen by
// a hash of (a, b), is held out and never trained on; held-out exact-match
// accuracy shows real learning rather than memorisation.
type additionTask struct {
	digits int
	max    int
}

func newAdditionTask(digits int) (*additionTask, error) {
	if digits < 1 || digits > 6 {
		return nil, fmt.Errorf("-digits %d: want 1 to 6", digits)
	}
	m := 1
	for range digits {
		m *= 10
	}
	return &additionTask{digits: digits, max: m}, nil
}

func (a *additionTask) describe() string {
	return fmt.Sprintf("%d-digit addition (answers reversed; 10%% of problems held out)", a.digits)
}

// rowLen is a problem's length as model input: the prompt and the answer
// but its final newline, which is only a target.
func (a *additionTask) rowLen() int { return addition.Tokens(a.digits) }

func (a *additionTask) seqLen(context int) (int, error) {
	if n := a.rowLen(); n <= context {
		return n, nil
	}
	return 0, fmt.Errorf("-digits %d: a problem is %d tokens, longer than the model's context of %d", a.digits, a.rowLen(), context)
}

// heldOut is the task's held-out rule (package addition).
func heldOut(x, y int) bool { return addition.HeldOut(x, y) }

func (a *additionTask) problem(x, y int) (prompt, answer string) {
	return addition.Problem(a.digits, x, y)
}

func (a *additionTask) sample(rng *rand.Rand) (int, int) {
	for {
		x, y := rng.IntN(a.max), rng.IntN(a.max)
		if !heldOut(x, y) {
			return x, y
		}
	}
}

func (a *additionTask) sampleHeldOut(rng *rand.Rand) (int, int) {
	for {
		x, y := rng.IntN(a.max), rng.IntN(a.max)
		if heldOut(x, y) {
			return x, y
		}
	}
}

// batch writes one problem per row: inputs are the problem but its last
// byte, targets the problem shifted by one, with the prompt's targets
// ignored. T must be rowLen.
func (a *additionTask) batch(rng *rand.Rand, xs, ys []int32, B, T int) {
	a.rows(rng, xs, ys, B, T, false)
}

// heldOutBatch is batch with held-out problems, for the held-out loss.
func (a *additionTask) heldOutBatch(rng *rand.Rand, xs, ys []int32, B, T int) {
	a.rows(rng, xs, ys, B, T, true)
}

func (a *additionTask) rows(rng *rand.Rand, xs, ys []int32, B, T int, held bool) {
	if T != a.rowLen() {
		panic(fmt.Sprintf("additionTask.batch: rows of %d tokens, want %d", T, a.rowLen()))
	}
	for b := range B {
		var p, ans string
		if held {
			p, ans = a.problem(a.sampleHeldOut(rng))
		} else {
			p, ans = a.problem(a.sample(rng))
		}
		seq := p + ans
		x, y := xs[b*T:(b+1)*T], ys[b*T:(b+1)*T]
		for t := range T {
			x[t], y[t] = int32(seq[t]), int32(seq[t+1])
			if t+1 < len(p) {
				y[t] = autograd.IgnoreIndex
			}
		}
	}
}

// tokenData is a language-modelling corpus of token ids: a text file
// tokenized with -tokenizer, or a token file (.bin: llm.c's or nanoGPT's
// format, tokendata.go). The last tenth is held out for evaluation.
type tokenData struct {
	name        string
	what        string // "text, 1234 bytes" or "llm.c token file"
	sha256      string // of the file's bytes, in hex: the run's identity (resume.go)
	tok         tokenizer.Tokenizer
	train, test []uint16
}

// loadTokens reads -data: a .bin file is token ids already, anything else
// text for tok. Both parts must hold a window of T+1 tokens with more
// than one start (fill draws one among len-T). A file too large for the
// host memory budget (nil: none) is refused unread (checkDataMemory).
func loadTokens(path string, tok tokenizer.Tokenizer, T int, budget *memory.HostBudget) (*tokenData, error) {
	bin := strings.EqualFold(filepath.Ext(path), ".bin")
	b, err := readData(path, func(size int64) error { return checkDataMemory(path, size, tok, bin, budget) })
	if err != nil {
		return nil, err
	}
	if len(b) == 0 {
		return nil, badInput(fmt.Errorf("-data %s: empty file (0 bytes): nothing to train on", path))
	}
	sum := sha256.Sum256(b) // about 1 s a GB: small beside tokenizing
	var ids []uint16
	var what string
	if bin {
		if ids, what, err = readTokenFile(path, b, tok); err != nil {
			return nil, badInput(err) // the file's contents
		}
	} else {
		ids, what, err = tokenizeText(b, tok)
	}
	if err != nil {
		return nil, err
	}
	if len(ids) < 10*(T+2) {
		return nil, badInput(fmt.Errorf("-data %s: %d tokens is too short for context %d (need at least %d)", path, len(ids), T, 10*(T+2)))
	}
	cut := len(ids) * 9 / 10
	return &tokenData{name: path, what: what, sha256: hex.EncodeToString(sum[:]), tok: tok, train: ids[:cut], test: ids[cut:]}, nil
}

// tokenizeText encodes the bytes b of a text file with tok.
func tokenizeText(b []byte, tok tokenizer.Tokenizer) ([]uint16, string, error) {
	what := fmt.Sprintf("text, %d bytes", len(b))
	if _, ok := tok.(tokenizer.Byte); ok {
		// The ids are the bytes: no ints of 8 bytes a byte in between
		// (they made a text take 19 times its size).
		out := make([]uint16, len(b))
		for i, c := range b {
			out[i] = uint16(c)
		}
		return out, what, nil
	}
	// The chunks' ids are garbage as soon as they are narrowed: collect
	// them at Go's default pace, not main's gcPercent (which let the heap
	// grow to 5 times what is live: 1.75 GB for 100 MB of text).
	if prev := debug.SetGCPercent(100); prev >= 0 && prev < 100 {
		debug.SetGCPercent(prev)
	} else {
		defer debug.SetGCPercent(prev)
	}
	start := time.Now()
	ids, err := tokenizer.EncodeUint16(tok, b, 0) // VocabSize <= 65536: checked with the flags
	if err != nil {
		return nil, "", err
	}
	what += fmt.Sprintf(" in %d %s tokens, tokenized in %v", len(ids), tok.Name(), time.Since(start).Round(time.Millisecond))
	return ids, what, nil
}

func (d *tokenData) describe() string {
	return fmt.Sprintf("%s (%s; %d train tokens, %d held-out tokens)", d.name, d.what, len(d.train), len(d.test))
}

func (d *tokenData) seqLen(context int) (int, error) { return context, nil }

func (d *tokenData) batch(rng *rand.Rand, xs, ys []int32, B, T int) {
	fill(d.train, rng, xs, ys, B, T)
}

// readData reads -data, which must be a regular file: a named pipe
// blocks until something writes to it, and a device may never end
// (/dev/zero was read until the process ran out of memory). fits checks
// its size first (checkDataMemory).
func readData(path string, fits func(size int64) error) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("-data: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("-data %s: not a regular file (%s)", path, cli.FileKind(fi.Mode()))
	}
	if err := fits(fi.Size()); err != nil {
		return nil, err
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("-data: %w", err)
	}
	return b, nil
}

// badInput marks err, a problem with the contents of an input file found
// after the flags were read (an empty -data, a truncated -resume), as a
// bad input: status 2, as a bad flag, with err's message.
func badInput(err error) error {
	return &cli.ExitError{Code: 2, Msg: err.Error()}
}

// fill writes B windows of T+1 tokens at random offsets of src: any of
// its len(src)-T windows, the last one included.
func fill(src []uint16, rng *rand.Rand, xs, ys []int32, B, T int) {
	for b := range B {
		o := rng.IntN(len(src) - T)
		for t := range T {
			xs[b*T+t] = int32(src[o+t])
			ys[b*T+t] = int32(src[o+t+1])
		}
	}
}

// randomData is uniform random tokens, as the PyTorch anchors use for
// benchmarks.
type randomData struct{ vocab int }

func (r randomData) describe() string { return "random tokens" }

func (r randomData) seqLen(context int) (int, error) { return context, nil }

func (r randomData) batch(rng *rand.Rand, xs, ys []int32, B, T int) {
	for i := range xs {
		xs[i], ys[i] = int32(rng.IntN(r.vocab)), int32(rng.IntN(r.vocab))
	}
}

// printable is s, a held-out problem's answer (the model's bytes, any
// of 256 ids), escaped for the terminal as the text sample is
// (cli.Printable: an ESC acted on it), its newline shown as \n.
func printable(s string) string {
	return strings.ReplaceAll(cli.Printable(s), "\n", `\n`)
}
