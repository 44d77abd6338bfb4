package main

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strings"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/tensor"
)

// evaluate returns the held-out metric: exact-match accuracy on held-out
// addition problems, or loss on the held-out tail of a text file.
func evaluate(tr *trainer, data dataset, task *additionTask) (string, error) {
	tr.model.SetTraining(false)
	defer tr.model.SetTraining(true)
	if task != nil {
		acc, err := additionAccuracy(tr, task, 256, nil)
		return fmt.Sprintf("held-out accuracy %.1f%%", 100*acc), err
	}
	td := data.(*textData)
	rng := rand.New(rand.NewPCG(7, 7))
	var sum float64
	const batches = 4
	for range batches {
		fill(td.test, rng, tr.xs, tr.ys, tr.B, tr.T)
		var l float64
		err := tensor.Try(func() {
			autograd.NoGrad(func() {
				tensor.WithScope(func() {
					l = tr.model.Loss(tr.inputs()).Item()
				})
			})
		})
		if err != nil {
			return "", err
		}
		sum += l
	}
	return fmt.Sprintf("held-out loss %.4f", sum/batches), nil
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
	gots, err := generate(tr, prompts, len(wants[0]), '\n', 0, nil)
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

// generate continues each prompt by up to max bytes, stopping a row at
// stop: greedily when temperature is 0, else sampling from the softmax of
// logits/temperature with rng. All prompts must have the same length.
func generate(tr *trainer, prompts []string, max int, stop byte, temperature float64, rng *rand.Rand) ([]string, error) {
	out := make([]string, len(prompts))
	cur := make([][]byte, len(prompts))
	for i, p := range prompts {
		cur[i] = []byte(p)
	}
	err := tensor.Try(func() {
		autograd.NoGrad(func() {
			for range max {
				T := min(len(cur[0]), tr.model.Config.Context)
				ids := make([]int32, 0, len(cur)*T)
				for _, c := range cur {
					for _, b := range c[len(c)-T:] {
						ids = append(ids, int32(b))
					}
				}
				tensor.WithScope(func() {
					x := tensor.FromInt32s(tr.dev, ids, len(cur), T)
					h := tr.model.Trunk(x)
					last := autograd.Narrow(h, 1, T-1, 1)
					logits := tr.model.Head(last).Value.Float32s() // (B, 1, V)
					V := tr.model.Config.Vocab
					for i := range cur {
						cur[i] = append(cur[i], byte(pick(logits[i*V:(i+1)*V], temperature, rng)))
					}
				})
			}
		})
	})
	for i, c := range cur {
		s := string(c[len(prompts[i]):])
		if j := strings.IndexByte(s, stop); j >= 0 {
			s = s[:j+1]
		}
		out[i] = s
	}
	return out, err
}

// showSamples prints a few held-out answers, or a text sample.
func showSamples(tr *trainer, data dataset, task *additionTask, o *options) error {
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
	td := data.(*textData)
	prompt := string(td.test[:min(len(td.test), tr.T/2)])
	got, err := generate(tr, []string{prompt}, o.sample, 0, 0.8, rand.New(rand.NewPCG(o.seed, 0x5A)))
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "sample (prompt from held-out text):\n%s%s\n", prompt, got[0])
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
