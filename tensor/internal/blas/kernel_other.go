//go:build !amd64 || purego

package blas

// Without the amd64 assembly (other architectures, or -tags purego) the
// package's own GEMM is not used: gonum's is faster than a scalar Go
// micro-kernel. The Go kernels still exist (kernel_go.go), so that the
// blocked driver builds and is tested everywhere.

var kernels []*microKernel

const noKernel = "no assembly kernel in this build"
