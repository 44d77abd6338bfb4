package amp

import (
	"fmt"
	"strings"

	"github.com/strata-ml/strata/tensor"
)

// Precisions are the names ParsePrecision reads, in order.
var Precisions = []string{"fp32", "tf32", "fp16", "bf16"}

// ParsePrecision reads a training precision by the name command lines
// use, in any case: "fp32" (plain float32), "tf32" (float32 with TF32
// products), "fp16" and "bf16" (autocast to that half type).
func ParsePrecision(s string) (State, error) {
	switch strings.ToLower(s) {
	case "fp32":
		return State{}, nil
	case "tf32":
		return State{TF32: true}, nil
	case "fp16":
		return State{Enabled: true, DType: tensor.Float16}, nil
	case "bf16":
		return State{Enabled: true, DType: tensor.BFloat16}, nil
	}
	return State{}, fmt.Errorf("amp: precision %q: want fp32, tf32, fp16 or bf16", s)
}
