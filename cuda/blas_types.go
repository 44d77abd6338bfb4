package cuda

import "fmt"

// Op is a cublasOperation_t: how a GEMM operand is used.
type Op int32

const (
	OpN Op = 0 // as stored
	OpT Op = 1 // transposed
	OpC Op = 2 // conjugate transposed (the same as OpT for real types)
)

func (o Op) String() string {
	switch o {
	case OpN:
		return "N"
	case OpT:
		return "T"
	case OpC:
		return "C"
	}
	return fmt.Sprintf("Op(%d)", int32(o))
}

// DataType is a cudaDataType_t: the element type of an operand of
// GemmStridedBatchedExRowMajor.
type DataType int32

const (
	TypeF32  DataType = 0  // CUDA_R_32F, float
	TypeF64  DataType = 1  // CUDA_R_64F, double
	TypeF16  DataType = 2  // CUDA_R_16F, IEEE half
	TypeBF16 DataType = 14 // CUDA_R_16BF, bfloat16
)

func (t DataType) String() string {
	switch t {
	case TypeF32:
		return "f32"
	case TypeF64:
		return "f64"
	case TypeF16:
		return "f16"
	case TypeBF16:
		return "bf16"
	}
	return fmt.Sprintf("DataType(%d)", int32(t))
}

// Size returns the element size in bytes.
func (t DataType) Size() int {
	switch t {
	case TypeF32:
		return 4
	case TypeF64:
		return 8
	case TypeF16, TypeBF16:
		return 2
	}
	return 0
}

// ComputeType is a cublasComputeType_t. Only the float32 compute types
// are accepted here (their alpha and beta are float32).
type ComputeType int32

const (
	Compute32F         ComputeType = 68 // CUBLAS_COMPUTE_32F
	Compute32FPedantic ComputeType = 69 // CUBLAS_COMPUTE_32F_PEDANTIC
	Compute32FFast16F  ComputeType = 74 // may down-convert inputs to half
	Compute32FFast16BF ComputeType = 75 // may down-convert inputs to bfloat16
	Compute32FFastTF32 ComputeType = 77 // may use TF32 tensor cores
)

// gemmAlgoDefault is CUBLAS_GEMM_DEFAULT (-1) as an argument word: the
// callee reads the low 32 bits of the int parameter, all ones.
const gemmAlgoDefault = ^uintptr(0)

func (c ComputeType) String() string {
	switch c {
	case Compute32F:
		return "32F"
	case Compute32FPedantic:
		return "32F_PEDANTIC"
	case Compute32FFast16F:
		return "32F_FAST_16F"
	case Compute32FFast16BF:
		return "32F_FAST_16BF"
	case Compute32FFastTF32:
		return "32F_FAST_TF32"
	}
	return fmt.Sprintf("ComputeType(%d)", int32(c))
}

// MathMode is a cublasMath_t.
type MathMode int32

const (
	MathDefault      MathMode = 0 // tensor cores where the types allow, no TF32 for float32
	MathPedantic     MathMode = 2 // exact IEEE arithmetic of the stated types
	MathTF32TensorOp MathMode = 3 // let float32 GEMMs use TF32 tensor cores
	// MathDisallowReducedPrecisionReduction may be or-ed with the others.
	MathDisallowReducedPrecisionReduction MathMode = 16
)
