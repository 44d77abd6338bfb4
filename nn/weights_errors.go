package nn

import "github.com/strata-ml/strata/tensor"

// IsTrainStateFile reports whether the safetensors file at path is a
// training state (SaveTrainState's: the weights with AdamW's moments),
// from its header: LoadWeights refuses one for its moments' names, and a
// program given one where it wants weights can say what it is instead.
// A file that cannot be read is not one (the load reports why).
func IsTrainStateFile(path string) bool {
	info, err := ReadWeightsInfo(path)
	return err == nil && info.TrainState
}

// mismatchError is a file whose names or shapes are not the model's: its
// message, wrapping tensor.ErrShape (errors.Is), so that a program can
// tell it from a file it cannot read at all.
type mismatchError struct{ msg string }

func (e *mismatchError) Error() string { return e.msg }
func (e *mismatchError) Unwrap() error { return tensor.ErrShape }
