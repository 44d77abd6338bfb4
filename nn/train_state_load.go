package nn

import "github.com/strata-ml/strata/tensor"

// readFileTensors reads the safetensors file at path into host memory
// (tensor.ReadSafetensorsEntries: tensor.ReadSafetensors' checks and
// errors, without making a tensor of any) and returns its tensors by
// name: LoadTrainState copies them to their devices a chunk at a time
// (stager), where reading them onto a device first held the state there
// twice.
func readFileTensors(path string) (map[string]fileTensor, map[string]string, error) {
	entries, meta, err := tensor.ReadSafetensorsEntries(path)
	if err != nil {
		return nil, nil, err
	}
	out := make(map[string]fileTensor, len(entries))
	for _, e := range entries {
		out[e.Name] = fileTensor{dt: e.DType, shape: e.Shape, data: e.Data}
	}
	return out, meta, nil
}
