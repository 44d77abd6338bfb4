package nn

import (
	"context"
	"fmt"

	"github.com/strata-ml/strata/tensor"
)

// SaveWeights writes the parameters to a safetensors file under their
// names (nanoGPT's keys for a GPT, so PyTorch's
// safetensors.torch.load_file and Hugging Face tools can read them):
// LayoutNanoGPT. SaveWeightsLayout writes Hugging Face's GPT-2 layout too;
// LoadWeights reads both. The parameters do not tell a GPT's number of
// heads: GPT.SaveWeights records its config in the metadata too.
func SaveWeights(path string, ps []*Parameter, meta map[string]string) error {
	return SaveWeightsContext(context.Background(), path, ps, meta)
}

// SaveWeightsContext is SaveWeights, atomic and durable as
// tensor.WriteSafetensorsContext: a failure, or ctx cancelled during the
// write (an interrupt), leaves the previous file and no temporary one.
func SaveWeightsContext(ctx context.Context, path string, ps []*Parameter, meta map[string]string) error {
	if ctx == nil {
		return fmt.Errorf("nn: saving %s: nil context (context.Background() for none): %w", path, tensor.ErrArgument)
	}
	byName, err := ByName(ps)
	if err != nil {
		return fmt.Errorf("nn: saving %s: %w", path, err)
	}
	m := make(map[string]*tensor.Tensor, len(byName))
	for name, p := range byName {
		m[name] = p.Value
	}
	return tensor.WriteSafetensorsContext(ctx, path, m, meta)
}
