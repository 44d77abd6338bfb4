package nn

import (
	"encoding/binary"
	"fmt"

	st "github.com/nlpodyssey/safetensors"

	"github.com/strata-ml/strata/tensor"
)

// checkFinite refuses a file tensor of dtype dt (a float) that holds a
// NaN or an infinity: such weights load, then fail at the first step or
// token with a message that blames the data or the learning rate. It
// reads the bits where they lie (an exponent of all ones), at memory
// speed: a small part of a load, which reads and converts them anyway.
func checkFinite(v st.TensorView, dt tensor.DType) error {
	var size int
	var exp uint64 // the exponent's bits
	switch dt {
	case tensor.Float64:
		size, exp = 8, 0x7ff0000000000000
	case tensor.Float32:
		size, exp = 4, 0x7f800000
	case tensor.Float16:
		size, exp = 2, 0x7c00
	case tensor.BFloat16:
		size, exp = 2, 0x7f80
	default:
		return nil
	}
	if i := firstAllOnes(v.Data(), size, exp); i >= 0 {
		return fmt.Errorf("element %d of %v is %s: the weights are not finite: %w", i/size, fileShape(v), nonFinite(v, dt, i), tensor.ErrArgument)
	}
	return nil
}

// firstAllOnes is the byte offset of the first little-endian value of
// size bytes in b whose bits exp are all set, or -1.
func firstAllOnes(b []byte, size int, exp uint64) int {
	switch size {
	case 8:
		for i := 0; i+8 <= len(b); i += 8 {
			if binary.LittleEndian.Uint64(b[i:])&exp == exp {
				return i
			}
		}
	case 4:
		e := uint32(exp)
		for i := 0; i+4 <= len(b); i += 4 {
			if binary.LittleEndian.Uint32(b[i:])&e == e {
				return i
			}
		}
	case 2:
		e := uint16(exp)
		for i := 0; i+2 <= len(b); i += 2 {
			if binary.LittleEndian.Uint16(b[i:])&e == e {
				return i
			}
		}
	}
	return -1
}

// nonFinite names the value at byte i: NaN, +Inf or -Inf.
func nonFinite(v st.TensorView, dt tensor.DType, i int) string {
	b := v.Data()
	var mantissa bool
	var sign byte
	switch dt {
	case tensor.Float64:
		mantissa, sign = binary.LittleEndian.Uint64(b[i:])&(1<<52-1) != 0, b[i+7]>>7
	case tensor.Float32:
		mantissa, sign = binary.LittleEndian.Uint32(b[i:])&(1<<23-1) != 0, b[i+3]>>7
	case tensor.Float16:
		mantissa, sign = binary.LittleEndian.Uint16(b[i:])&(1<<10-1) != 0, b[i+1]>>7
	default:
		mantissa, sign = binary.LittleEndian.Uint16(b[i:])&(1<<7-1) != 0, b[i+1]>>7
	}
	switch {
	case mantissa:
		return "NaN"
	case sign == 1:
		return "-Inf"
	}
	return "+Inf"
}
