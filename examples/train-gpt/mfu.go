package main

import (
	"strings"

	"github.com/strata-ml/strata/nn"
)

// flopsPerToken is the model FLOPs of one trained token (forward and
// backward, the PaLM appendix B count nanoGPT's estimate_mfu uses):
// 6 N for the weights' products, N the parameters without the position
// embeddings (the token embedding counts: it is the output head), plus
// 12 L T C for the attention's two products. Recomputation by
// checkpointing is not counted: this is model FLOPs, not hardware FLOPs.
func flopsPerToken(cfg nn.GPTConfig, params int) float64 {
	n := float64(params - cfg.Context*cfg.Width)
	return 6*n + 12*float64(cfg.Layers*cfg.Context*cfg.Width)
}

// peakFLOPS is the dense tensor-core (or, for fp32, SIMT) peak of the
// GPUs strata has numbers for, by precision, from the vendors' data
// sheets (SXM parts); 0 when unknown (the MFU is then not reported).
func peakFLOPS(model, precision string) float64 {
	type peaks struct{ half, tf32, fp32 float64 }
	var p peaks
	switch m := strings.ToUpper(model); {
	case strings.Contains(m, "H100"), strings.Contains(m, "H200"), strings.Contains(m, "H800"):
		p = peaks{989.4e12, 494.7e12, 66.9e12}
	case strings.Contains(m, "A100"), strings.Contains(m, "A800"):
		p = peaks{312e12, 156e12, 19.5e12}
	default:
		return 0
	}
	switch precision {
	case "fp16", "bf16":
		return p.half
	case "tf32":
		return p.tf32
	}
	return p.fp32
}
