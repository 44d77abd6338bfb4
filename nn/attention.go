package nn

import (
	"fmt"

	"github.com/strata-ml/strata/tensor"
)

// Attention says how CausalSelfAttention computes its attention.
type Attention int

const (
	// AttentionPlain is autograd.CausalAttention: the (B, H, T, T)
	// probabilities are materialised for the op and recomputed in
	// backward. The default until fused is measured faster.
	AttentionPlain Attention = iota
	// AttentionFused is autograd.FusedCausalAttentionQKV
	// (FlashAttention-2 over the heads of the q/k/v product in place): no
	// (B, H, T, T) matrix at all, and no head split or merge copies; the
	// same function and dropout mask.
	AttentionFused
)

func (a Attention) String() string {
	switch a {
	case AttentionPlain:
		return "plain"
	case AttentionFused:
		return "fused"
	}
	return fmt.Sprintf("Attention(%d)", int(a))
}

// ParseAttention maps "plain" and "fused" to an Attention.
func ParseAttention(s string) (Attention, error) {
	switch s {
	case "plain":
		return AttentionPlain, nil
	case "fused":
		return AttentionFused, nil
	}
	return 0, fmt.Errorf("nn: attention %q: want plain or fused", s)
}

// AutoAttention is the runtime's default attention on dev, tensorCores
// saying whether the products run on tensor cores (half-precision
// autocast, or float32 with TF32 allowed): fused on CUDA when they do,
// where the fused kernels' tensor-core versions run (gpt2 bf16 1.41x
// faster than plain on the H200, bench/results/gpu-call2-2026-12-02-s7-summary.txt;
// gpt2 tf32 1.23x, bench/results/speed-2026-12-02-s13.md), plain
// elsewhere: the float32-math fused kernels hold no (B, H, T, T) matrix
// but train gpt2 1.4% slower than plain attention
// (bench/results/hybrid-2026-12-02-s11.md, call 1), so they are chosen for
// memory, not by default.
func AutoAttention(dev tensor.Device, tensorCores bool) Attention {
	if dev.Kind() == tensor.KindCUDA && tensorCores {
		return AttentionFused
	}
	return AttentionPlain
}

// SetAttention sets how every block attends (plain by default). Losses
// and gradients agree between the two up to float32 rounding.
func (g *GPT) SetAttention(a Attention) {
	for _, b := range g.Blocks {
		b.Attn.Attention = a
	}
}
