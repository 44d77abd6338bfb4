package nn

import (
	"encoding/binary"

	"github.com/strata-ml/strata/tensor"
)

// fileTensor is a tensor of a safetensors file as its bytes lie in the
// file read into host memory: no device holds it until it is copied.
// A transposed one (LoadWeights' Hugging Face Conv1D weights, (in, out)
// in the file) is loaded as its transpose: its elements go to the
// device in the order of the parameter, (out, in).
type fileTensor struct {
	dt         tensor.DType
	shape      []int  // in the file
	data       []byte // little-endian elements
	transposed bool   // a matrix, loaded as its transpose
}

func (f fileTensor) numel() int { return len(f.data) / f.dt.Size() }

// put writes f's elements from the off-th on (in the order they are
// loaded in) into dst, as many as it holds. The host transposes: a
// device copy cannot write into a strided view (tensor.CopyFrom wants a
// contiguous destination), and transposing on the device took a copy
// of the whole tensor there, where a staging buffer holds only a chunk.
// A permutation commutes with the dtype conversion of the copy that
// follows: the values are those of converting the transposed tensor.
func (f fileTensor) put(dst []byte, off int) {
	sz := f.dt.Size()
	if !f.transposed {
		copy(dst, f.data[off*sz:])
		return
	}
	rows, cols := f.shape[0], f.shape[1] // the file's; the loaded matrix is (cols, rows)
	for e, end := off, off+len(dst)/sz; e < end; {
		i, j := e/rows, e%rows // element j of loaded row i is the file's (j, i)
		d := dst[(e-off)*sz:]
		if n := (end - e) / rows; j == 0 && n > 0 {
			transposeRows(d[:n*rows*sz], f.data, i, rows, cols, sz)
			e += n * rows
			continue
		}
		n := min(rows-j, end-e) // a chunk's first or last row, in part
		column(d[:n*sz], f.data, (j*cols+i)*sz, cols*sz, sz)
		e += n
	}
}

// transposeTile is the side of the square tiles transposeRows copies: a
// tile's rows of the file stay in the cache while its columns are read,
// where reading a whole column at a time, a row's length apart (often a
// power of two, which maps every read to one cache set), took about a
// microsecond an element.
const transposeTile = 16

// transposeRows writes the loaded rows (the file's columns) from the
// i0-th on, whole, into dst, as many as it holds, a tile at a time.
func transposeRows(dst, src []byte, i0, rows, cols, sz int) {
	n := len(dst) / (rows * sz)
	for jb := 0; jb < rows; jb += transposeTile {
		je := min(jb+transposeTile, rows)
		for ib := i0; ib < i0+n; ib += transposeTile {
			for i := ib; i < min(ib+transposeTile, i0+n); i++ {
				d := (i - i0) * rows
				column(dst[(d+jb)*sz:(d+je)*sz], src, (jb*cols+i)*sz, cols*sz, sz)
			}
		}
	}
}

// column copies len(dst)/sz elements of sz bytes from src, the first at
// byte s and the next each step bytes further, into dst. The sizes of
// the float dtypes (the only ones transposed) move as one word each.
func column(dst, src []byte, s, step, sz int) {
	le := binary.LittleEndian
	switch sz {
	case 2:
		for d := 0; d < len(dst); d, s = d+2, s+step {
			le.PutUint16(dst[d:], le.Uint16(src[s:]))
		}
	case 4:
		for d := 0; d < len(dst); d, s = d+4, s+step {
			le.PutUint32(dst[d:], le.Uint32(src[s:]))
		}
	case 8:
		for d := 0; d < len(dst); d, s = d+8, s+step {
			le.PutUint64(dst[d:], le.Uint64(src[s:]))
		}
	default:
		for d := 0; d < len(dst); d, s = d+sz, s+step {
			copy(dst[d:d+sz], src[s:s+sz])
		}
	}
}
