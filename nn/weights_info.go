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
	data   int64            // the file's bytes after the header; -1: unknown (not a regular file)
}

// ReadWeightsInfo reads the header of the safetensors file at path, and
// only the header, once: IsTrainStateFile and GPTConfigOfWeights are
// ReadWeightsInfo's TrainState and Config. A file that cannot be opened
// is an error wrapping the open's; one that is not a safetensors file (a
// header cut short, over tensor.MaxSafetensorsHeader bytes (100,000,000)
// or not JSON, malformed metadata or tensor entries) an error naming the
// file.
func ReadWeightsInfo(path string) (WeightsInfo, error) {
	shapes, meta, data, err := readHeader(path)
	if err != nil {
		return WeightsInfo{}, err
	}
	return WeightsInfo{Metadata: meta, TrainState: hasMoments(shapes), path: path, shapes: shapes, data: data}, nil
}

// Config returns the shape of the GPT in the file, as GPTConfigOfWeights
// does, from the header ReadWeightsInfo read: the metadata's "config"
// entry when it has one (fromMeta is then true; a config the tensor
// shapes contradict is an error wrapping tensor.ErrShape), else the
// tensor shapes, with 0 heads for the caller to set. Tensors that are not
// a GPT's are an error. So is a config with more parameters than the
// file's data holds (at 2 bytes each, float16's), wrapping
// tensor.ErrShape: a caller builds the model from it before the load
// would find the file short.
func (w WeightsInfo) Config() (cfg GPTConfig, fromMeta bool, err error) {
	if s, ok := w.Metadata[configKey]; ok {
		cfg, err = ParseGPTConfig(s)
		if err != nil {
			return cfg, false, fmt.Errorf("nn: %s: metadata config: %w", w.path, err)
		}
		if err := checkConfigShapes(w.path, cfg, w.shapes); err != nil {
			return cfg, false, err
		}
		fromMeta = true
	} else if cfg, _, err = configOfShapes(w.path, w.shapes); err != nil {
		return cfg, false, err
	}
	if err := w.checkConfigSize(cfg); err != nil {
		return cfg, false, err
	}
	return cfg, fromMeta, nil
}

// checkConfigSize refuses a config whose parameters, at 2 bytes each
// (the narrowest float a file holds them in), need more than the file's
// data: a metadata config whose tensors tell no GPT to compare it with
// (no position table), or layers that a block number of a tensor of no
// elements claims, would otherwise size a model past what the file could
// fill (a million layers from a 1 KB file).
func (w WeightsInfo) checkConfigSize(cfg GPTConfig) error {
	if w.data < 0 {
		return nil // not a regular file: the load reads what there is
	}
	params := cfg.approxParams() // NumParams, without overflow
	if 2*params <= float64(w.data) {
		return nil
	}
	return &mismatchError{fmt.Sprintf("nn: %s: a GPT of vocabulary %d, context %d, %d layers and width %d has %.0f parameters, more than the file's %d bytes of tensor data hold: the file is not that model's weights", w.path, cfg.Vocab, cfg.Context, cfg.Layers, cfg.Width, params, w.data)}
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
