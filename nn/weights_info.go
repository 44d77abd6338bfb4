package nn

import (
	"fmt"
	"strings"
)

// WeightsInfo is what the header of a safetensors weights file tells
// without its tensors: ReadWeightsInfo reads it once, for a program that
// wants more than one of IsTrainStateFile, GPTConfigOfWeights and the
// metadata before it loads the file.
type WeightsInfo struct {
	// Metadata is the file's string metadata (its "__metadata__"
	// header entry); nil when it has none.
	Metadata map[string]string
	// TrainState reports whether the file is a training state
	// (SaveTrainState's: the weights with AdamW's moments), as
	// IsTrainStateFile does.
	TrainState bool

	path   string           // for Config's errors
	shapes map[string][]int // the tensors' shapes, by name
}

// ReadWeightsInfo reads the header of the safetensors file at path, and
// only the header, once: IsTrainStateFile and GPTConfigOfWeights are
// ReadWeightsInfo's TrainState and Config. A file that cannot be opened
// is an error wrapping the open's; one that is not a safetensors file (a
// header cut short, over tensor.MaxSafetensorsHeader bytes (100,000,000)
// or not JSON, malformed metadata or tensor entries) an error naming the
// file.
func ReadWeightsInfo(path string) (WeightsInfo, error) {
	shapes, meta, err := readHeader(path)
	if err != nil {
		return WeightsInfo{}, err
	}
	return WeightsInfo{Metadata: meta, TrainState: hasMoments(shapes), path: path, shapes: shapes}, nil
}

// Config returns the shape of the GPT in the file, as GPTConfigOfWeights
// does, from the header ReadWeightsInfo read: the metadata's "config"
// entry when it has one (fromMeta is then true; a config the tensor
// shapes contradict is an error wrapping tensor.ErrShape), else the
// tensor shapes, with 0 heads for the caller to set. Tensors that are not
// a GPT's are an error.
func (w WeightsInfo) Config() (cfg GPTConfig, fromMeta bool, err error) {
	if s, ok := w.Metadata[configKey]; ok {
		cfg, err = ParseGPTConfig(s)
		if err != nil {
			return cfg, false, fmt.Errorf("nn: %s: metadata config: %w", w.path, err)
		}
		if err := checkConfigShapes(w.path, cfg, w.shapes); err != nil {
			return cfg, false, err
		}
		return cfg, true, nil
	}
	return configOfShapes(w.path, w.shapes)
}

// hasMoments reports whether a file's tensor names include AdamW's
// moments: a training state's.
func hasMoments(shapes map[string][]int) bool {
	for name := range shapes {
		if strings.HasPrefix(name, ExpAvgPrefix) || strings.HasPrefix(name, ExpAvgSqPrefix) {
			return true
		}
	}
	return false
}
