package nn

import (
	"fmt"
	"strings"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/tensor"
)

// HeadLoss chooses how GPT.Loss computes the output head and the loss.
// The default computes the full (B, T, V) logits and their cross-entropy,
// as nanoGPT does: with GPT-2's vocabulary at batch 8 by 1024 that is 1.6
// GB of float32 logits, and as much again for their gradient. Fused runs
// autograd.LinearCrossEntropy instead: the logits of ChunkRows rows at a
// time (0: autograd.DefaultHeadChunkBytes of them), their loss and their
// gradient made in the forward and multiplied into the gradients of the
// hidden states and the embedding at once, so that only one chunk's
// logits are ever held. The loss and gradients are the same up to the
// order of floating-point sums (under autocast, up to the rounding of the
// logits to the half type, which the fused head makes as PyTorch's
// autocast does); the products are the same three GEMMs.
// Forward still returns full logits (for generation and evaluation).
type HeadLoss struct {
	Fused     bool
	ChunkRows int
}

// String is "full" or "fused" (with the chunk rows when set).
func (h HeadLoss) String() string {
	switch {
	case !h.Fused:
		return "full"
	case h.ChunkRows > 0:
		return fmt.Sprintf("fused(%d rows)", h.ChunkRows)
	}
	return "fused"
}

// ParseHeadLoss reads "full" or "fused", in any case.
func ParseHeadLoss(s string) (HeadLoss, error) {
	switch strings.ToLower(s) {
	case "full":
		return HeadLoss{}, nil
	case "fused":
		return HeadLoss{Fused: true}, nil
	}
	return HeadLoss{}, fmt.Errorf("nn: head loss %q: want full or fused", s)
}

// loss is the fused head's mean cross-entropy of h Wteᵀ against targets.
func (h HeadLoss) loss(hidden, wte *autograd.Var, targets *tensor.Tensor) *autograd.Var {
	return autograd.LinearCrossEntropy(hidden, wte, targets, h.ChunkRows)
}
