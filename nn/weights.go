package nn

import (
	"context"
	"fmt"
	"slices"

	"github.com/strata-ml/strata/tensor"
)

// SaveWeights writes the parameters to a safetensors file under their
// names (nanoGPT's keys for a GPT, so PyTorch's
// safetensors.torch.load_file and Hugging Face tools can read them).
func SaveWeights(path string, ps []*Parameter, meta map[string]string) error {
	return SaveWeightsContext(context.Background(), path, ps, meta)
}

// SaveWeightsContext is SaveWeights, atomic and durable as
// tensor.WriteSafetensorsContext: a failure, or ctx cancelled during the
// write (an interrupt), leaves the previous file and no temporary one.
func SaveWeightsContext(ctx context.Context, path string, ps []*Parameter, meta map[string]string) error {
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

// LoadWeights reads a safetensors file into the parameters, converting
// dtypes. Every parameter must be present with its exact shape; names in
// the file that match no parameter are an error too (strict, like
// PyTorch's load_state_dict), except "lm_head.weight" (a tied head).
func LoadWeights(path string, ps []*Parameter) (meta map[string]string, err error) {
	return readInto(path, ps, func(byName map[string]*Parameter, ts map[string]*tensor.Tensor, meta map[string]string) (map[string]string, error) {
		var missing, unexpected []string
		for _, p := range ps {
			t, ok := ts[p.Name]
			if !ok {
				missing = append(missing, p.Name)
				continue
			}
			if !slices.Equal(t.Shape(), p.Value.Shape()) {
				return nil, fmt.Errorf("nn: loading %s: %q has shape %v in the file, the model wants %v", path, p.Name, t.Shape(), p.Value.Shape())
			}
		}
		for name := range ts {
			if _, ok := byName[name]; !ok && name != "lm_head.weight" {
				unexpected = append(unexpected, name)
			}
		}
		if len(missing) > 0 || len(unexpected) > 0 {
			slices.Sort(missing)
			slices.Sort(unexpected)
			return nil, fmt.Errorf("nn: loading %s: missing %v, unexpected %v", path, missing, unexpected)
		}
		for _, p := range ps {
			p.Value.CopyFrom(ts[p.Name])
		}
		return meta, nil
	})
}

// readInto reads the safetensors file at path onto the parameters'
// device, in a context of its own, and hands its tensors and metadata to
// use with the parameters by name; the file's tensors are released after.
// A panic of use (a failed copy) comes back as an error.
func readInto(path string, ps []*Parameter, use func(byName map[string]*Parameter, ts map[string]*tensor.Tensor, meta map[string]string) (map[string]string, error)) (meta map[string]string, err error) {
	if len(ps) == 0 {
		return nil, fmt.Errorf("nn: loading %s: no parameters to load into", path)
	}
	byName, err := ByName(ps) // before the file is read onto the device
	if err != nil {
		return nil, fmt.Errorf("nn: loading %s: %w", path, err)
	}
	c := tensor.NewCtx()
	if e := tensor.Try(func() {
		c.WithScope(func() {
			var ts map[string]*tensor.Tensor
			if ts, meta, err = c.ReadSafetensors(path, ps[0].Value.Device()); err == nil {
				meta, err = use(byName, ts, meta)
			}
		})
	}); e != nil {
		return nil, fmt.Errorf("nn: loading %s: %w", path, e)
	}
	return meta, err
}
