package cuda

import (
	"errors"
	"fmt"
	"strconv"
)

// Sentinel errors, for errors.Is. Every *Error and every argument error
// returned by this package wraps at most one of them.
var (
	// ErrNoDriver: libcuda could not be loaded, is the toolkit's stub, is
	// too old for a call this package makes, or its cuInit fails with
	// CUDA_ERROR_UNKNOWN or CUDA_ERROR_OPERATING_SYSTEM (no usable GPU).
	ErrNoDriver = errors.New("cuda: no usable CUDA driver")
	// ErrNoDevice: the driver sees no CUDA device, or the ordinal asked
	// for does not exist.
	ErrNoDevice = errors.New("cuda: no CUDA device")
	// ErrOutOfMemory: device, managed or page-locked host memory is
	// exhausted (CUDA_ERROR_OUT_OF_MEMORY, CUBLAS_STATUS_ALLOC_FAILED).
	ErrOutOfMemory = errors.New("cuda: out of memory")
	// ErrInvalidValue: an argument was rejected, by this package's own
	// checks or by the library (CUDA_ERROR_INVALID_VALUE,
	// CUBLAS_STATUS_INVALID_VALUE).
	ErrInvalidValue = errors.New("cuda: invalid value")
	// ErrNotSupported: the device or driver cannot do what was asked.
	ErrNotSupported = errors.New("cuda: operation not supported")
)

// Library names the NVIDIA library an *Error comes from.
type Library uint8

const (
	// LibDriver is libcuda, whose status type is CUresult.
	LibDriver Library = iota
	// LibCUBLAS is libcublas, whose status type is cublasStatus_t.
	LibCUBLAS
)

func (l Library) String() string {
	switch l {
	case LibDriver:
		return "cuda"
	case LibCUBLAS:
		return "cublas"
	}
	return "library(" + strconv.Itoa(int(l)) + ")"
}

// Error is a failed call into the CUDA driver or cuBLAS: the C function
// that failed, what it was asked (Detail, may be empty), and the status
// code with its symbolic name and description as the library reports
// them. The zero Library is the driver, so &Error{Code: 2} is an
// out-of-memory error for errors.Is.
type Error struct {
	Library Library
	Call    string // C function, e.g. "cuMemAlloc_v2"
	Detail  string // arguments worth knowing, e.g. "67108864 bytes"
	Code    int    // CUresult or cublasStatus_t
	Name    string // e.g. "CUDA_ERROR_OUT_OF_MEMORY"
	Message string // e.g. "out of memory"
}

func (e *Error) Error() string {
	s := e.Library.String() + ": " + e.Call
	if e.Detail != "" {
		s += " (" + e.Detail + ")"
	}
	s += ": " + e.Name + " (" + strconv.Itoa(e.Code) + ")"
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// Is reports whether target is the sentinel that e's status code maps to.
func (e *Error) Is(target error) bool {
	s := e.sentinel()
	return s != nil && target == s
}

func (e *Error) sentinel() error {
	if e.Library == LibCUBLAS {
		switch e.Code {
		case cublasStatusAllocFailed:
			return ErrOutOfMemory
		case cublasStatusInvalidValue:
			return ErrInvalidValue
		case cublasStatusArchMismatch, cublasStatusNotSupported:
			return ErrNotSupported
		}
		return nil
	}
	switch e.Code {
	case cudaErrorOutOfMemory:
		return ErrOutOfMemory
	case cudaErrorInvalidValue:
		return ErrInvalidValue
	case cudaErrorNoDevice, cudaErrorInvalidDevice:
		return ErrNoDevice
	case cudaErrorStubLibrary, cudaErrorSystemDriverMismatch, cudaErrorCompatNotSupportedOnDevice:
		return ErrNoDriver
	case cudaErrorNotSupported:
		return ErrNotSupported
	}
	return nil
}

// argError is a misuse caught by this package before any C call: it names
// the operation and the offending values, and wraps a sentinel.
type argError struct {
	op, msg string
	kind    error
}

func (e *argError) Error() string { return "cuda: " + e.op + ": " + e.msg }
func (e *argError) Unwrap() error { return e.kind }

// invalidArg returns an error wrapping ErrInvalidValue.
func invalidArg(op, format string, args ...any) error {
	return &argError{op: op, msg: fmt.Sprintf(format, args...), kind: ErrInvalidValue}
}

// notSupported returns an error wrapping ErrNotSupported.
func notSupported(op, format string, args ...any) error {
	return &argError{op: op, msg: fmt.Sprintf(format, args...), kind: ErrNotSupported}
}
