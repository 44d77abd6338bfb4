package tensor

import (
	"encoding/binary"
)

// cudaMaxDims is MAX_DIMS of kernels/common.cuh: the most dims a strided
// kernel takes after merging.
const cudaMaxDims = 8

// cudaLayout is a destination shape with the strides of one or two
// source views, after dropping unit dims and merging neighbours that are
// contiguous with each other in every operand (as cpukern's layout does):
// a contiguous tensor becomes one dim, a bias add (rows, cols) with
// strides (0, 1). ok is false when more than cudaMaxDims dims remain.
type cudaLayout struct {
	ndim  int
	shape [cudaMaxDims]int
	str   [2][cudaMaxDims]int
	ok    bool
}

// coalesce builds the layout of shape with one or two operands' strides.
func coalesce(shape []int, strides ...[]int) cudaLayout {
	var l cudaLayout
	k := len(strides)
	// Build innermost first into oversized scratch, then reverse.
	var sh [2 * cudaMaxDims]int
	var st [2][2 * cudaMaxDims]int
	m := 0
	for d := len(shape) - 1; d >= 0; d-- {
		size := shape[d]
		if size == 1 {
			continue
		}
		if m > 0 {
			merge := true
			for o := 0; o < k; o++ {
				if strides[o][d] != st[o][m-1]*sh[m-1] {
					merge = false
					break
				}
			}
			if merge {
				sh[m-1] *= size
				continue
			}
		}
		if m == len(sh) {
			return l // far too many dims: not ok
		}
		sh[m] = size
		for o := 0; o < k; o++ {
			st[o][m] = strides[o][d]
		}
		m++
	}
	if m > cudaMaxDims {
		return l
	}
	l.ndim, l.ok = m, true
	for i := 0; i < m; i++ {
		l.shape[i] = sh[m-1-i]
		for o := 0; o < 2; o++ {
			l.str[o][i] = st[o][m-1-i]
		}
	}
	return l
}

// bytes1 encodes struct Layout1 (int ndim, int pad, i64 shape[8], i64
// str[8]) into buf; bytes2 encodes Layout2 (a second stride array).
func (l *cudaLayout) bytes1(buf *[8 + 16*8]byte) []byte {
	binary.LittleEndian.PutUint32(buf[0:], uint32(l.ndim))
	binary.LittleEndian.PutUint32(buf[4:], 0)
	for i := range cudaMaxDims {
		binary.LittleEndian.PutUint64(buf[8+8*i:], uint64(l.shape[i]))
		binary.LittleEndian.PutUint64(buf[8+64+8*i:], uint64(l.str[0][i]))
	}
	return buf[:]
}

func (l *cudaLayout) bytes2(buf *[8 + 24*8]byte) []byte {
	l.bytes1((*[8 + 16*8]byte)(buf[:8+16*8])) // Layout2 starts as Layout1
	for i := range cudaMaxDims {
		binary.LittleEndian.PutUint64(buf[8+128+8*i:], uint64(l.str[1][i]))
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
