package nn

import (
	"fmt"
	"maps"
	"math"
	"math/bits"
	"slices"

	"github.com/strata-ml/strata/tensor"
)

// GPTConfig is the shape of a GPT.
type GPTConfig struct {
	Vocab   int     // vocabulary size
	Context int     // maximum sequence length (block size)
	Layers  int     // transformer blocks
	Heads   int     // attention heads
	Width   int     // embedding width (n_embd)
	Dropout float64 // dropout on embeddings, attention and residuals
	Batch   int     // the preset's training batch size (a default, not part of the model)
}

// GPTConfigs are the named shapes of DESIGN.md: tiny (the CPU benchmark),
// char (nanoGPT's Shakespeare-char), gpt2 (GPT-2 small, 124M) and
// gpt2-medium (355M).
var GPTConfigs = map[string]GPTConfig{
	"tiny": {Vocab: 256, Context: 64, Layers: 2, Heads: 4, Width: 128, Batch: 16},
	"char": {Vocab: 256, Context: 256, Layers: 6, Heads: 6, Width: 384, Batch: 64},
	"gpt2": {Vocab: 50257, Context: 1024, Layers: 12, Heads: 12, Width: 768, Batch: 8},
	// GPT-2 medium, 355M: what the hybrid placement trains under a 4 GiB
	// device budget (examples/memstrategies).
	"gpt2-medium": {Vocab: 50257, Context: 1024, Layers: 24, Heads: 16, Width: 1024, Batch: 8},
}

// GPTConfigNames lists the presets' names, sorted, for messages.
func GPTConfigNames() []string { return slices.Sorted(maps.Keys(GPTConfigs)) }

// LookupGPTConfig returns the named preset.
func LookupGPTConfig(name string) (GPTConfig, error) {
	c, ok := GPTConfigs[name]
	if !ok {
		return c, fmt.Errorf("nn: unknown GPT config %q (have %v)", name, GPTConfigNames())
	}
	return c, nil
}

// Validate reports the first inconsistency in c, as an error wrapping
// tensor.ErrArgument.
func (c GPTConfig) Validate() error {
	switch {
	case c.Vocab <= 0 || c.Context <= 0 || c.Layers <= 0 || c.Heads <= 0 || c.Width <= 0:
		return fmt.Errorf("nn: GPT config %+v: every size must be positive: %w", c, tensor.ErrArgument)
	case c.Width%c.Heads != 0:
		return fmt.Errorf("nn: GPT config: width %d is not divisible by %d heads: %w", c.Width, c.Heads, tensor.ErrArgument)
	case !(c.Dropout >= 0 && c.Dropout < 1): // NaN too
		return fmt.Errorf("nn: GPT config: dropout %v not in [0, 1): %w", c.Dropout, tensor.ErrArgument)
	case c.Batch < 0:
		return fmt.Errorf("nn: GPT config: batch %d is negative (0: none given): %w", c.Batch, tensor.ErrArgument)
	}
	if _, ok := c.numParams(); !ok {
		return fmt.Errorf("nn: GPT config %+v: its parameter count does not fit in an int (about %.3g): %w", c, c.approxParams(), tensor.ErrArgument)
	}
	return nil
}

// NumParams is the parameter count of the model c describes (the output
// head is tied to the token embedding and not counted twice), for a
// config Validate accepts (it refuses one whose count does not fit in an
// int: the count wrapped, 264 for a vocabulary of math.MaxInt).
func (c GPTConfig) NumParams() int {
	n, _ := c.numParams()
	return n
}

// numParams is NumParams and whether it fits in an int. Per block: two
// layer norms (2*2*C), the attention's QKV (3*C*C + 3*C) and output
// (C*C + C) projections, the MLP's (4*C*C + 4*C, 4*C*C + C): 12*C*C +
// 13*C.
func (c GPTConfig) numParams() (n int, ok bool) {
	ok = c.Vocab >= 0 && c.Context >= 0 && c.Layers >= 0 && c.Width >= 0
	mul := func(a, b uint64) uint64 {
		hi, lo := bits.Mul64(a, b)
		ok = ok && hi == 0
		return lo
	}
	add := func(a, b uint64) uint64 {
		sum, carry := bits.Add64(a, b, 0)
		ok = ok && carry == 0
		return sum
	}
	C := uint64(c.Width)
	block := add(mul(12, mul(C, C)), mul(13, C))
	total := add(add(mul(uint64(c.Vocab), C), mul(uint64(c.Context), C)), add(mul(uint64(c.Layers), block), mul(2, C)))
	ok = ok && total <= math.MaxInt
	return int(total), ok
}

// approxParams is the parameter count in float64, which cannot wrap:
// for Validate's message about a count too large for an int and for
// WeightsInfo's check of a config against a file's size.
func (c GPTConfig) approxParams() float64 {
	C := float64(c.Width)
	return float64(c.Vocab)*C + float64(c.Context)*C + float64(c.Layers)*(12*C*C+13*C) + 2*C
}
