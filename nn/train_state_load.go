package nn

import (
	"errors"
	"fmt"

	st "github.com/nlpodyssey/safetensors"

	"github.com/strata-ml/strata/internal/atomicfile"
	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/tensor"
)

// readFileTensors reads the safetensors file at path into host memory
// and returns its tensors, refusing what tensor.ReadSafetensors refuses
// with the same errors (its checks are those of the header, the size and
// the dtypes), but without making a tensor of any: LoadTrainState copies
// them to their devices a chunk at a time (stager), where reading them
// onto a device first held the state there twice.
func readFileTensors(path string) (map[string]fileTensor, map[string]string, error) {
	buf, err := tensor.ReadSafetensorsFile(path) // the data only when the header describes the file's size
	if errors.Is(err, atomicfile.ErrNotRegular) {
		return nil, nil, fmt.Errorf("tensor: reading safetensors: %w: %w", err, tensor.ErrArgument)
	} else if errors.Is(err, tensor.ErrArgument) || errors.Is(err, memory.ErrOutOfMemory) {
		return nil, nil, err
	} else if err != nil {
		return nil, nil, fmt.Errorf("tensor: reading safetensors: %w", err)
	}
	// ReadMetadata checks the header's length and the tensors' offsets
	// against the data (each tensor's bytes are its shape's in its dtype).
	n, md, err := st.ReadMetadata(buf)
	if err != nil {
		return nil, nil, fmt.Errorf("tensor: safetensors %s: bad header: %w", path, err)
	}
	hdr, data := buf[8:8+n], buf[8+n:]
	if err := tensor.CheckParsedSafetensorsHeader(path, hdr, md); err != nil {
		return nil, nil, err
	}
	infos := md.Tensors()
	out := make(map[string]fileTensor, len(infos))
	for name, info := range infos {
		dt, err := tensor.ParseDType(info.DType.String())
		if err != nil {
			return nil, nil, fmt.Errorf("tensor: safetensors %s: tensor %q has unsupported dtype %v: %w", path, name, info.DType, tensor.ErrDType)
		}
		shape, err := tensor.SafetensorsShape(info.Shape)
		if err != nil {
			return nil, nil, fmt.Errorf("tensor: safetensors %s: tensor %q: %w", path, name, err)
		}
		b := data[info.DataOffsets[0]:info.DataOffsets[1]]
		if !sizeIs(shape, dt.Size(), len(b)) { // ReadMetadata's check, kept where a copy relies on it
			return nil, nil, fmt.Errorf("tensor: safetensors %s: tensor %q: %d bytes for %v %v: %w", path, name, len(b), dt, shape, tensor.ErrShape)
		}
		out[name] = fileTensor{dt: dt, shape: shape, data: b}
	}
	return out, md.Metadata(), nil
}

// sizeIs reports whether shape's elements of size bytes are n bytes, the
// product checked without overflowing.
func sizeIs(shape []int, size, n int) bool {
	left := n
	for _, d := range shape {
		if d == 0 {
			return n == 0
		}
		if left%d != 0 {
			return false
		}
		left /= d
	}
	return left == size
}
