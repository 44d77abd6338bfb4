package nn

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/strata-ml/strata/tensor"
)

// GenerateOptions say how GPT.Generate continues a prompt. The zero value
// (with MaxNewTokens set) is greedy decoding without stop tokens.
type GenerateOptions struct {
	// MaxNewTokens is the most tokens to generate (0 generates none): a
	// bound, so a huge one with StopTokens or OnToken generates until
	// they stop it.
	MaxNewTokens int
	// Temperature 0 is greedy decoding: the most likely token each step
	// (the lowest id among equals); TopK, TopP and Seed are not used.
	// Above 0, tokens are sampled from softmax(logits / Temperature).
	Temperature float64
	// TopK, when above 0, samples among the TopK most likely tokens only
	// (exactly TopK: equals are taken by lowest id; more than the
	// vocabulary is all of it).
	TopK int
	// TopP, when in (0, 1), samples from the nucleus: the fewest most
	// likely tokens whose probabilities (after Temperature and TopK) add
	// up to TopP at least. 0 and 1 keep every token.
	TopP float64
	// Seed starts the random stream of sampling: the same seed, model and
	// options give the same tokens.
	Seed uint64
	// Vocab, when above 0, restricts the tokens chosen to ids below it
	// (the logits of the others are ignored): for a tokenizer with fewer
	// ids than the model's vocabulary, such as bytes (256) or GPT-2's
	// 50257 ids in a vocabulary padded to 50304, whose extra ids it could
	// not decode. 0 chooses among the whole vocabulary.
	Vocab int
	// StopTokens end the generation after one of them is generated (it is
	// the last token returned). None when empty.
	StopTokens []int
	// OnToken, when not nil, receives each generated token as soon as it
	// is chosen (streaming); returning false stops the generation after
	// that token.
	OnToken func(token int) bool
}

// Validate reports the first bad option for a model of vocabulary vocab.
func (o GenerateOptions) Validate(vocab int) error {
	switch {
	case o.MaxNewTokens < 0:
		return fmt.Errorf("nn: generate: MaxNewTokens %d is negative", o.MaxNewTokens)
	case math.IsNaN(o.Temperature) || math.IsInf(o.Temperature, 0) || o.Temperature < 0:
		return fmt.Errorf("nn: generate: Temperature %v: want 0 (greedy) or a finite positive number", o.Temperature)
	case o.TopK < 0:
		return fmt.Errorf("nn: generate: TopK %d is negative (0 keeps every token)", o.TopK)
	case math.IsNaN(o.TopP) || o.TopP < 0 || o.TopP > 1:
		return fmt.Errorf("nn: generate: TopP %v: want a probability in (0, 1] (0 means 1: every token)", o.TopP)
	case o.Vocab < 0 || o.Vocab > vocab:
		return fmt.Errorf("nn: generate: Vocab %d: want 1 to the model's vocabulary of %d (0: all of it)", o.Vocab, vocab)
	}
	if o.Vocab > 0 {
		vocab = o.Vocab
	}
	for _, t := range o.StopTokens {
		if t < 0 || t >= vocab {
			return fmt.Errorf("nn: generate: stop token %d is outside the vocabulary [0, %d)", t, vocab)
		}
	}
	return nil
}

// Generate continues prompt by up to o.MaxNewTokens tokens and returns
// the new tokens (without the prompt). It runs the model in eval mode (no
// dropout, whatever SetTraining said) under no-grad in c (a new Ctx when
// nil), on the parameters' device, with a KV cache (Decoder): the prompt
// is fed once, then each token costs one position. Only the last
// position's logits are copied to the host, where the token is chosen.
//
// The prompt must hold at least one token, every one of the vocabulary;
// it may be longer than Config.Context. The model sees the last Context
// tokens of the sequence (the prompt, then the prompt and the tokens
// generated so far), as nanoGPT's generate crops its conditioning: a
// longer prompt is fed from its last Context tokens, and once the
// sequence outgrows the context the cache is refilled with that window at
// positions 0..Context-1 for every further token (a full forward of
// Context positions per token from then on). The tokens are those of
// recomputing the whole (cropped) sequence at every step.
//
// On an error the tokens generated so far are returned with it.
func (g *GPT) Generate(c *tensor.Ctx, prompt []int, o GenerateOptions) ([]int, error) {
	cfg := g.Config
	if err := o.Validate(cfg.Vocab); err != nil {
		return nil, err
	}
	if len(prompt) == 0 {
		return nil, errors.New("nn: generate: empty prompt")
	}
	for i, t := range prompt {
		if t < 0 || t >= cfg.Vocab {
			return nil, fmt.Errorf("nn: generate: prompt token %d (at %d) is outside the vocabulary [0, %d)", t, i, cfg.Vocab)
		}
	}
	if o.MaxNewTokens == 0 {
		return []int{}, nil
	}
	d, err := g.NewDecoder(c)
	if err != nil {
		return nil, err
	}
	defer d.Release()
	vocab := cfg.Vocab
	if o.Vocab > 0 {
		vocab = o.Vocab
	}
	s := newSampler(o, vocab)
	seq := slices.Clone(prompt)
	// MaxNewTokens is a bound, not a size: "until a stop token" is often
	// asked as a huge one, so the output grows as tokens come.
	out := make([]int, 0, min(o.MaxNewTokens, 1024))
	feed := prompt[max(0, len(prompt)-cfg.Context):] // the conditioning: at most Context tokens
	for len(out) < o.MaxNewTokens {
		if d.Len()+len(feed) > cfg.Context {
			// Crop: the last Context tokens, from position 0.
			d.Reset()
			feed = seq[len(seq)-cfg.Context:]
		}
		logits, err := d.Feed(feed)
		if err != nil {
			return out, fmt.Errorf("nn: generate: token %d: %w", len(out), err)
		}
		tok, err := s.pick(logits[:vocab])
		if err != nil {
			return out, fmt.Errorf("nn: generate: token %d: %w", len(out), err)
		}
		seq, out = append(seq, tok), append(out, tok)
		if o.OnToken != nil && !o.OnToken(tok) || slices.Contains(o.StopTokens, tok) {
			break
		}
		feed = seq[len(seq)-1:]
	}
	return out, nil
}

// sampler chooses tokens from logits as the options say, reusing its
// buffers from token to token.
type sampler struct {
	o     GenerateOptions
	rng   *rand.Rand
	p     []float64
	order []int
}

func newSampler(o GenerateOptions, vocab int) *sampler {
	return &sampler{
		o:     o,
		rng:   rand.New(rand.NewPCG(o.Seed, 0x9E3779B97F4A7C15)),
		p:     make([]float64, vocab),
		order: make([]int, vocab),
	}
}

// pick returns the next token for logits (one row of the vocabulary).
func (s *sampler) pick(logits []float32) (int, error) {
	best := 0
	for i, l := range logits {
		if math.IsNaN(float64(l)) || math.IsInf(float64(l), 0) {
			return 0, fmt.Errorf("logit %d is %v", i, l)
		}
		if l > logits[best] {
			best = i
		}
	}
	if s.o.Temperature == 0 {
		return best, nil
	}
	// The tokens by logit, largest first (the lowest id among equals):
	// only when TopK or TopP must cut the list.
	n := len(logits)
	order := s.order[:n]
	for i := range order {
		order[i] = i
	}
	k := n
	if s.o.TopK > 0 {
		k = min(s.o.TopK, n)
	}
	nucleus := s.o.TopP > 0 && s.o.TopP < 1
	if k < n || nucleus {
		slices.SortFunc(order, func(a, b int) int {
			if c := cmp.Compare(logits[b], logits[a]); c != 0 {
				return c
			}
			return cmp.Compare(a, b)
		})
		order = order[:k]
	}
	// Probabilities of the kept tokens, from the largest logit.
	p := s.p[:len(order)]
	var sum float64
	for i, t := range order {
		p[i] = math.Exp((float64(logits[t]) - float64(logits[best])) / s.o.Temperature)
		sum += p[i]
	}
	if nucleus {
		// The fewest tokens (in order) whose probability reaches TopP.
		acc, cut := 0.0, len(order)
		for i := range p {
			acc += p[i]
			if acc >= s.o.TopP*sum {
				cut = i + 1
				break
			}
		}
		order, p = order[:cut], p[:cut]
		sum = 0
		for _, q := range p {
			sum += q
		}
	}
	r := s.rng.Float64() * sum
	for i, q := range p {
		if r -= q; r < 0 {
			return order[i], nil
		}
	}
	return order[len(order)-1], nil // rounding: r was within the last
}
