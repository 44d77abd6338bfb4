package tensor

import (
	"encoding/binary"

	"github.com/strata-ml/strata/tensor/internal/layout"
)

// cudaMaxDims is MAX_DIMS of kernels/common.cuh: the most dims a strided
// kernel takes after merging. The layouts come merged from the ops
// (mergeDims); the CUDA backend refuses one with more dims (cudaLayoutFits).
const cudaMaxDims = 8

// cudaLayoutFits reports whether l fits the kernels' Layout1 and Layout2.
func cudaLayoutFits(l *layout.Layout) bool { return l.NDim <= cudaMaxDims }

// layoutBytes1 encodes l as struct Layout1 (int ndim, int pad, i64
// shape[8], i64 str[8]) into buf; layoutBytes2 as Layout2 (a second
// stride array). l must fit (cudaLayoutFits).
func layoutBytes1(l *layout.Layout, buf *[8 + 16*8]byte) []byte {
	binary.LittleEndian.PutUint32(buf[0:], uint32(l.NDim))
	binary.LittleEndian.PutUint32(buf[4:], 0)
	for i := range cudaMaxDims {
		binary.LittleEndian.PutUint64(buf[8+8*i:], uint64(l.Shape[i]))
		binary.LittleEndian.PutUint64(buf[8+64+8*i:], uint64(l.Strides[0][i]))
	}
	return buf[:]
}

func layoutBytes2(l *layout.Layout, buf *[8 + 24*8]byte) []byte {
	layoutBytes1(l, (*[8 + 16*8]byte)(buf[:8+16*8])) // Layout2 starts as Layout1
	for i := range cudaMaxDims {
		binary.LittleEndian.PutUint64(buf[8+128+8*i:], uint64(l.Strides[1][i]))
	}
	return buf[:]
}

// indexVariant chooses 32-bit index arithmetic when n fits.
func indexVariant(n int) int {
	if n <= 1<<32-1 {
		return kIdx32
	}
	return kIdx64
}
