package nn

import (
	"fmt"
	"strings"

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

// ParseAttention maps "plain" and "fused", in any case, to an Attention.
func ParseAttention(s string) (Attention, error) {
	switch strings.ToLower(s) {
	case "plain":
		return AttentionPlain, nil
	case "fused":
		return AttentionFused, nil
	}
	return 0, fmt.Errorf("nn: attention %q: want plain or fused", s)
}

// AutoAttention is the runtime's default attention on dev for heads of
// headDim elements, lowPrecision saying whether the products run in half
// precision (autocast) or TF32: fused on CUDA wherever the fused kernels
// run on tensor cores, plain elsewhere. They do in half precision (gpt2
// bf16 1.41x faster than plain on the H200,
// bench/results/gpu-call2-2026-12-02-s7-summary.txt), in TF32 (gpt2 1.23x)
// and in float32 at heads of up to 64, through three TF32 products a
// product, as accurate as float32 (3xTF32: gpt2 fp32 1.08x,
// bench/results/speed-2026-12-02-s13.md). Wider float32 heads keep
// float32 math in the fused kernels, which hold no (B, H, T, T) matrix but
// train 1.4% slower than plain attention
// (bench/results/hybrid-2026-12-02-s11.md, call 1): they are chosen for
// memory, not by default. A nil dev is the CPU, as Options takes it.
func AutoAttention(dev tensor.Device, lowPrecision bool, headDim int) Attention {
	if dev != nil && dev.Kind() == tensor.KindCUDA && (lowPrecision || headDim <= 64) {
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
