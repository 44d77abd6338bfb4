package cuda

import (
	"fmt"
	"unsafe"
)

// cuBLASLt's enum values and struct layouts (cublasLt.h; the same in
// cuBLAS 11.8, 12.x and 13.x).

// cublasLtMatmulDescAttributes_t, with the C type each value is.
const (
	ltDescTransA       = 3  // int32_t cublasOperation_t
	ltDescTransB       = 4  // int32_t cublasOperation_t
	ltDescEpilogue     = 7  // uint32_t cublasLtEpilogue_t
	ltDescBiasPointer  = 8  // void*
	ltDescBiasDataType = 26 // int32_t cudaDataType
)

// cublasLtMatmulPreferenceAttributes_t.
const (
	ltPrefMaxWorkspaceBytes = 1 // uint64_t
	ltPrefMinAlignmentA     = 5 // uint32_t, bytes; A..D are 5..8
	ltPrefMinAlignmentB     = 6
	ltPrefMinAlignmentC     = 7
	ltPrefMinAlignmentD     = 8
)

// cublasLtEpilogue_t values used here.
const (
	ltEpilogueDefault = 1
	ltEpilogueBias    = 4   // D rows (m) long, added to every column
	ltEpilogueBGradA  = 256 // D rows (m) long: sum over k of op(A)
	ltEpilogueBGradB  = 512 // D columns (n) long: sum over k of op(B)
)

// ltHeuristicResult is cublasLtMatmulHeuristicResult_t: the algorithm
// (cublasLtMatmulAlgo_t, 8 uint64), the workspace it needs, its status,
// and a utilisation estimate. 96 bytes; TestLtLayouts checks the offsets.
type ltHeuristicResult struct {
	algo          [8]uint64
	workspaceSize uint64 // size_t
	state         int32  // cublasStatus_t
	wavesCount    float32
	reserved      [4]int32
}

const ltHeuristicResultSize = unsafe.Sizeof(ltHeuristicResult{})

// Epilogue is what an LtMatmul does after the product, in row-major
// terms (op(A) is M x K, op(B) K x N, C M x N).
type Epilogue int

const (
	// EpilogueNone: C = alpha op(A) op(B) + beta C.
	EpilogueNone Epilogue = iota
	// EpilogueBias: then C[i][j] += Bias[j], a vector of N elements added
	// to every row (a linear layer's bias).
	EpilogueBias
	// EpilogueBiasGradA: also Bias[i] = sum over k of op(A)[i][k], M
	// elements (the bias gradient when op(A) is dYᵀ, as in dW = dYᵀ X).
	EpilogueBiasGradA
	// EpilogueBiasGradB: also Bias[j] = sum over k of op(B)[k][j], N
	// elements (the bias gradient when op(B) is dY, as in dWᵀ = Xᵀ dY).
	EpilogueBiasGradB
)

func (e Epilogue) String() string {
	switch e {
	case EpilogueNone:
		return "none"
	case EpilogueBias:
		return "bias"
	case EpilogueBiasGradA:
		return "bias-grad-A"
	case EpilogueBiasGradB:
		return "bias-grad-B"
	}
	return fmt.Sprintf("Epilogue(%d)", int(e))
}

// needsBias reports whether the epilogue reads or writes a bias vector.
func (e Epilogue) needsBias() bool { return e != EpilogueNone }

// biasLen is the bias vector's length for an M x N result.
func (e Epilogue) biasLen(m, n int) int {
	switch e {
	case EpilogueBias, EpilogueBiasGradB:
		return n
	case EpilogueBiasGradA:
		return m
	}
	return 0
}

// columnMajor is the cublasLtEpilogue_t of e once the operands are
// swapped for cuBLASLt's column-major call (C^T = op(B)^T op(A)^T): a
// bias over C's columns is a bias over C^T's rows (EPILOGUE_BIAS), and
// the row-major op(A) is the column-major B, so BiasGradA is BGRADB and
// BiasGradB is BGRADA.
func (e Epilogue) columnMajor() uint32 {
	switch e {
	case EpilogueBias:
		return ltEpilogueBias
	case EpilogueBiasGradA:
		return ltEpilogueBGradB
	case EpilogueBiasGradB:
		return ltEpilogueBGradA
	}
	return ltEpilogueDefault
}
