//go:build !amd64 || purego

package blas

// Without the amd64 assembly (other architectures, or -tags purego) the
// package's own GEMM is not used: gonum's is faster than a scalar Go
// micro-kernel. tile still exists, in Go, so that the blocked driver
// builds and can be tested everywhere.

var haveKernel = false

const kernelName = "Go 6×16 kernel"

const noKernel = "no assembly kernel in this build"

func tile(k int, ap, bp, c []float32, ldc int, alpha, beta float32, load bool) {
	tileGo(k, ap, bp, c, ldc, alpha, beta, load)
}
