package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"

	"github.com/strata-ml/strata/autograd"
)

// Tokens are bytes: the vocabulary is 256 wide, so any text file works and
// the built-in task needs no tokenizer.

// dataset yields training batches and knows how to evaluate a model.
type dataset interface {
	// batch fills x and y (B*T each, row-major) with one training batch.
	batch(rng *rand.Rand, x, y []int32, B, T int)
	describe() string
}

// additionTask is the default data: problems "a+b=c" with n-digit a and
// b, the answer c written least-significant digit first (so each answer
// digit depends only on digits already seen), one problem per line. Only
// the answer digits and the newline are trained on (the question is
// random: other targets get autograd.IgnoreIndex). One problem in ten,
// chosen by a hash of (a, b), is held out and never trained on; held-out
// exact-match accuracy shows real learning rather than memorisation.
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

func heldOut(x, y int) bool {
	h := uint64(x)*0x9E3779B97F4A7C15 ^ uint64(y)*0xC2B2AE3D27D4EB4F
	h ^= h >> 29
	h *= 0xBF58476D1CE4E5B9
	h ^= h >> 32
	return h%10 == 0
}

func (a *additionTask) problem(x, y int) (prompt, answer string) {
	sum := strconv.Itoa(x + y)
	sum = fmt.Sprintf("%0*s", a.digits+1, sum)
	r := []byte(sum)
	for i, j := 0, len(r)-1; i < j; i, j = i+1, j-1 {
		r[i], r[j] = r[j], r[i]
	}
	return fmt.Sprintf("%0*d+%0*d=", a.digits, x, a.digits, y), string(r) + "\n"
}

func (a *additionTask) sample(rng *rand.Rand) (int, int) {
	for {
		x, y := rng.IntN(a.max), rng.IntN(a.max)
		if !heldOut(x, y) {
			return x, y
		}
	}
}

func (a *additionTask) batch(rng *rand.Rand, xs, ys []int32, B, T int) {
	for b := range B {
		var seq []int32
		var train []bool
		for len(seq) < T+1 {
			p, ans := a.problem(a.sample(rng))
			for _, c := range []byte(p) {
				seq, train = append(seq, int32(c)), append(train, false)
			}
			for _, c := range []byte(ans) {
				seq, train = append(seq, int32(c)), append(train, true)
			}
		}
		for t := range T {
			xs[b*T+t] = seq[t]
			ys[b*T+t] = seq[t+1]
			if !train[t+1] {
				ys[b*T+t] = autograd.IgnoreIndex
			}
		}
	}
}

// textData is a byte-level language-modelling corpus from a file; the
// last tenth is held out for evaluation.
type textData struct {
	name        string
	train, test []byte
}

func loadText(path string, T int) (*textData, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("-data: %w", err)
	}
	if len(b) < 10*(T+1) {
		return nil, fmt.Errorf("-data %s: %d bytes is too short for context %d (need at least %d)", path, len(b), T, 10*(T+1))
	}
	cut := len(b) * 9 / 10
	return &textData{name: path, train: b[:cut], test: b[cut:]}, nil
}

func (d *textData) describe() string {
	return fmt.Sprintf("text %s (%d train bytes, %d held-out bytes)", d.name, len(d.train), len(d.test))
}

func (d *textData) batch(rng *rand.Rand, xs, ys []int32, B, T int) {
	fill(d.train, rng, xs, ys, B, T)
}

func fill(src []byte, rng *rand.Rand, xs, ys []int32, B, T int) {
	for b := range B {
		o := rng.IntN(len(src) - T - 1)
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

func (r randomData) batch(rng *rand.Rand, xs, ys []int32, B, T int) {
	for i := range xs {
		xs[i], ys[i] = int32(rng.IntN(r.vocab)), int32(rng.IntN(r.vocab))
	}
}

func printable(s string) string {
	return strings.NewReplacer("\n", `\n`).Replace(s)
}
