package nn

import "github.com/strata-ml/strata/tensor"

// fileTensor is a tensor of a safetensors file as its bytes lie in the
// file read into host memory: no device holds it until it is copied.
type fileTensor struct {
	dt    tensor.DType
	shape []int
	data  []byte // little-endian elements
}

func (f fileTensor) numel() int { return len(f.data) / f.dt.Size() }

// put writes f's elements from the off-th on into dst, as many as it
// holds.
func (f fileTensor) put(dst []byte, off int) { copy(dst, f.data[off*f.dt.Size():]) }
