package cuda

import (
	"strings"
	"sync/atomic"
)

// Error injection, for tests of what a failing driver does to the layers
// above: FailCall makes the n-th call whose C function name contains a
// given string fail with a given status, without reaching the library,
// exactly as if the driver had returned it. Every entry point that goes
// through a Context (driver calls) or a BLAS handle (cuBLAS calls) is
// covered: launches, copies, memsets, allocations, stream and event
// calls, GEMMs. When nothing is armed a call pays one atomic load.
//
// The status is a CUresult for driver calls; a cuBLAS call fails with
// CUBLAS_STATUS_ALLOC_FAILED when the CUresult is out of memory (2), else
// with CUBLAS_STATUS_EXECUTION_FAILED. An injected status is not sticky:
// unlike a real launch failure it leaves the context usable, which is the
// point (the caller's recovery is what is tested).

// callFault is an armed FailCall.
type callFault struct {
	match  string
	left   atomic.Int64 // matching calls before the one that fails
	code   uint32
	seen   atomic.Int64
	failed atomic.Int64
}

var armedCall atomic.Pointer[callFault]

// FailCall makes the n-th call from now (1: the next) whose C function
// name contains match ("" matches every call, "cuLaunchKernel" the
// launches, "Gemm" cuBLAS's products) fail with CUresult code; n <= 0
// disarms. With a huge n it only counts the matching calls (FaultCalls).
func FailCall(match string, n int64, code int) {
	if n <= 0 {
		armedCall.Store(nil)
		return
	}
	f := &callFault{match: match, code: uint32(code)}
	f.left.Store(n)
	armedCall.Store(f)
}

// FaultCalls returns how many calls matched the armed FailCall since it
// was armed, and how many of them were failed (0 or 1).
func FaultCalls() (seen, failed int64) {
	f := armedCall.Load()
	if f == nil {
		return 0, 0
	}
	return f.seen.Load(), f.failed.Load()
}

// injectedStatus is the status an armed FailCall gives the call to sym,
// if it is the one that fails.
func injectedStatus(sym string) (uint32, bool) {
	f := armedCall.Load()
	if f == nil || !strings.Contains(sym, f.match) {
		return 0, false
	}
	f.seen.Add(1)
	if f.left.Add(-1) != 0 {
		return 0, false
	}
	f.failed.Add(1)
	return f.code, true
}

// injectedBLASStatus maps an injected CUresult to a cublasStatus_t.
func injectedBLASStatus(code uint32) uint32 {
	if code == cudaErrorOutOfMemory {
		return cublasStatusAllocFailed
	}
	return cublasStatusExecutionFailed
}
