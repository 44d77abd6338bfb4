package tensor

import (
	"fmt"
	"strings"
)

// DType is the element type of a tensor.
type DType uint8

const (
	Float32  DType = iota // IEEE 754 single precision: the default
	Float64               // double precision: references and gradient checks
	Float16               // IEEE 754 half precision (storage and mixed precision)
	BFloat16              // brain float: float32's exponent, 8 bits of mantissa
	Int32                 // token ids and indices
	numDTypes
)

var dtypeInfo = [numDTypes]struct {
	name  string
	size  int
	float bool
	st    string // safetensors dtype string
}{
	{"float32", 4, true, "F32"},
	{"float64", 8, true, "F64"},
	{"float16", 2, true, "F16"},
	{"bfloat16", 2, true, "BF16"},
	{"int32", 4, false, "I32"},
}

// Size is the number of bytes of one element.
func (d DType) Size() int {
	if d < numDTypes {
		return dtypeInfo[d].size
	}
	return 0
}

// IsFloat reports whether d is a floating-point type.
func (d DType) IsFloat() bool { return d < numDTypes && dtypeInfo[d].float }

// IsHalf reports whether d is a 16-bit float (float16 or bfloat16).
func (d DType) IsHalf() bool { return d == Float16 || d == BFloat16 }

func (d DType) String() string {
	if d < numDTypes {
		return dtypeInfo[d].name
	}
	return fmt.Sprintf("DType(%d)", uint8(d))
}

// SafetensorsName is the dtype's name in the safetensors format ("F32", ...).
func (d DType) SafetensorsName() string {
	if d < numDTypes {
		return dtypeInfo[d].st
	}
	return ""
}

// ParseDType accepts the names printed by String ("float32"), the usual
// short forms ("f32", "fp16", "bf16", "half") and safetensors names ("F32").
func ParseDType(s string) (DType, error) {
	switch strings.ToLower(s) {
	case "float32", "f32", "fp32", "float":
		return Float32, nil
	case "float64", "f64", "fp64", "double":
		return Float64, nil
	case "float16", "f16", "fp16", "half":
		return Float16, nil
	case "bfloat16", "bf16":
		return BFloat16, nil
	case "int32", "i32":
		return Int32, nil
	}
	return 0, fmt.Errorf("tensor: unknown dtype %q (want float32, float64, float16, bfloat16 or int32): %w", s, ErrDType)
}
