package main

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"syscall"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/internal/cli"
	"github.com/strata-ml/strata/tensor"
)

// evaluate returns the held-out metric (exact-match accuracy on held-out
// addition problems, or loss on the held-out tail of the data) as text,
// and the held-out loss: the mean loss of 4 batches of held-out problems
// or windows, drawn by a generator of its own (the same at every
// evaluation).
func evaluate(tr *trainer, data dataset, task *additionTask) (string, float64, error) {
	tr.model.SetTraining(false)
	defer tr.model.SetTraining(true)
	rng := rand.New(rand.NewPCG(7, 7))
	var sum float64
	const batches = 4
	for range batches {
		if task != nil {
			task.heldOutBatch(rng, tr.xs, tr.ys, tr.B, tr.T)
		} else {
			fill(data.(*tokenData).test, rng, tr.xs, tr.ys, tr.B, tr.T)
		}
		var l float64
		// In the trainer's context, as its inputs are: a scope of that
		// context releases everything, and no graph is recorded.
		err := tensor.Try(func() {
			autograd.NoGradIn(tr.c, func() {
				tr.c.WithScope(func() {
					l = tr.model.Loss(tr.inputs()).Item()
				})
			})
		})
		if err != nil {
			return "", 0, err
		}
		sum += l
	}
	loss := sum / batches
	if task != nil {
		acc, err := additionAccuracy(tr, task, 256, nil)
		return fmt.Sprintf("held-out accuracy %.1f%%  held-out loss %.4f", 100*acc, loss), loss, err
	}
	return fmt.Sprintf("held-out loss %.4f", loss), loss, nil
}

// additionAccuracy answers n held-out problems greedily and returns the
// fraction answered exactly; show, if not nil, receives each transcript.
func additionAccuracy(tr *trainer, task *additionTask, n int, show func(prompt, got, want string)) (float64, error) {
	rng := rand.New(rand.NewPCG(11, 11))
	prompts, wants := make([]string, 0, n), make([]string, 0, n)
	for len(prompts) < n {
		x, y := rng.IntN(task.max), rng.IntN(task.max)
		if heldOut(x, y) {
			p, a := task.problem(x, y)
			prompts, wants = append(prompts, p), append(wants, a)
		}
	}
	gots, err := generateText(tr, prompts, len(wants[0]), '\n')
	if err != nil {
		return 0, err
	}
	right := 0
	for i := range prompts {
		if gots[i] == wants[i] {
			right++
		}
		if show != nil {
			show(prompts[i], gots[i], wants[i])
		}
	}
	return float64(right) / float64(n), nil
}

// generateText continues each prompt (bytes, of the same length) by up
// to max bytes greedily, each row cut after its first stop byte.
func generateText(tr *trainer, prompts []string, max int, stop byte) ([]string, error) {
	ids := make([][]int32, len(prompts))
	for i, p := range prompts {
		for _, b := range []byte(p) {
			ids[i] = append(ids[i], int32(b))
		}
	}
	got, err := generate(tr, ids, max, 0, nil, 256, nil)
	out := make([]string, len(prompts))
	for i, g := range got {
		b := make([]byte, len(g))
		for j, id := range g {
			b[j] = byte(id)
		}
		s := string(b)
		if j := strings.IndexByte(s, stop); j >= 0 {
			s = s[:j+1]
		}
		out[i] = s
	}
	return out, err
}

// generate continues each prompt (token ids; all of the same length) by
// max tokens: greedily when temperature is 0, else sampling from the
// softmax of logits/temperature with rng, among the first vocab ids (the
// tokenizer's: a model's vocabulary may be larger). stop, when not nil,
// is asked before each token: true ends the generation there, with the
// tokens made so far.
func generate(tr *trainer, prompts [][]int32, max int, temperature float64, rng *rand.Rand, vocab int, stop func() bool) ([][]int32, error) {
	cur := make([][]int32, len(prompts))
	for i, p := range prompts {
		cur[i] = append([]int32(nil), p...)
	}
	err := tensor.Try(func() {
		autograd.NoGrad(func() {
			for range max {
				if stop != nil && stop() {
					return
				}
				T := min(len(cur[0]), tr.model.Config.Context)
				ids := make([]int32, 0, len(cur)*T)
				for _, c := range cur {
					ids = append(ids, c[len(c)-T:]...)
				}
				tensor.WithScope(func() {
					x := tensor.FromInt32s(tr.dev, ids, len(cur), T)
					h := tr.model.Trunk(x)
					last := autograd.Narrow(h, 1, T-1, 1)
					logits := tr.model.Head(last).Value.Float32s() // (B, 1, V)
					V := tr.model.Config.Vocab
					for i := range cur {
						cur[i] = append(cur[i], int32(pick(logits[i*V:i*V+min(V, vocab)], temperature, rng)))
					}
				})
			}
		})
	})
	out := make([][]int32, len(cur))
	for i, c := range cur {
		out[i] = c[len(prompts[i]):]
	}
	return out, err
}

// showSamples prints a few held-out answers, or a text sample of
// -sample tokens (none for -sample 0). interrupted, when not nil, is
// asked before each token of the text sample: a signal (SIGINT, SIGTERM)
// ends it there, so that the run goes on to save its weights at once
// instead of after the whole sample (a long one took minutes, and a
// second signal then quit without saving anything).
func showSamples(tr *trainer, data dataset, task *additionTask, o *options, interrupted func() (syscall.Signal, bool)) error {
	tr.model.SetTraining(false)
	if task != nil {
		fmt.Fprintln(os.Stderr, "held-out problems (answers are written reversed):")
		_, err := additionAccuracy(tr, task, 8, func(p, got, want string) {
			mark := "ok"
			if got != want {
				mark = "WRONG, want " + printable(want)
			}
			fmt.Fprintf(os.Stderr, "  %s%s  %s\n", p, printable(got), mark)
		})
		return err
	}
	if o.sample <= 0 { // -sample 0: no sample, nor its header
		return nil
	}
	td := data.(*tokenData)
	prompt := td.test[:min(len(td.test), tr.T/2)]
	p32 := make([]int32, len(prompt))
	for i, id := range prompt {
		p32[i] = int32(id)
	}
	var stop func() bool
	var sig syscall.Signal
	stopped := false
	if interrupted != nil {
		stop = func() bool {
			sig, stopped = interrupted()
			return stopped
		}
	}
	got, err := generate(tr, [][]int32{p32}, o.sample, 0.8, rand.New(rand.NewPCG(o.seed, 0x5A)), td.tok.VocabSize(), stop)
	if err != nil {
		return err
	}
	ids := make([]int, 0, len(p32)+len(got[0]))
	for _, id := range p32 {
		ids = append(ids, int(id))
	}
	for _, id := range got[0] {
		ids = append(ids, int(id))
	}
	text, err := td.tok.Decode(ids)
	if err != nil {
		return err
	}
	// Escaped: the model's text may hold control characters (an ESC).
	// Whole: the prompt's tokens may end inside a character (a byte of
	// it, with -tokenizer byte) that the generated ones complete, and
	// escaping the two parts apart showed its bytes as \xNN.
	fmt.Fprintf(os.Stderr, "sample (prompt from held-out text, %d %s tokens generated):\n%s\n", len(got[0]), td.tok.Name(), cli.Printable(text))
	if stopped {
		fmt.Fprintf(os.Stderr, "train-gpt: sample stopped by %v after %d of %d tokens\n", sig, len(got[0]), o.sample)
	}
	return nil
}

// pick returns the argmax of logits (temperature 0) or a sample from
// softmax(logits / temperature).
func pick(logits []float32, temperature float64, rng *rand.Rand) int {
	best := 0
	for v := range logits {
		if logits[v] > logits[best] {
			best = v
		}
	}
	if temperature <= 0 {
		return best
	}
	var sum float64
	p := make([]float64, len(logits))
	for v, l := range logits {
		p[v] = math.Exp((float64(l) - float64(logits[best])) / temperature)
		sum += p[v]
	}
	r := rng.Float64() * sum
	for v := range p {
		if r -= p[v]; r < 0 {
			return v
		}
	}
	return best
}
