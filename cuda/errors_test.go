package cuda

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestErrorFormat(t *testing.T) {
	e := &Error{Call: "cuMemAlloc_v2", Detail: "67108864 bytes on cuda:0", Code: 2, Name: "CUDA_ERROR_OUT_OF_MEMORY", Message: "out of memory"}
	assert.Equal(t, "cuda: cuMemAlloc_v2 (67108864 bytes on cuda:0): CUDA_ERROR_OUT_OF_MEMORY (2): out of memory", e.Error())

	b := &Error{Library: LibCUBLAS, Call: "cublasSgemm_v2", Code: 7, Name: "CUBLAS_STATUS_INVALID_VALUE"}
	assert.Equal(t, "cublas: cublasSgemm_v2: CUBLAS_STATUS_INVALID_VALUE (7)", b.Error())
	assert.Equal(t, "library(9)", Library(9).String())
}

func TestErrorIs(t *testing.T) {
	cases := []struct {
		lib  Library
		code int
		want error
	}{
		{LibDriver, 2, ErrOutOfMemory},
		{LibDriver, 1, ErrInvalidValue},
		{LibDriver, 100, ErrNoDevice},
		{LibDriver, 101, ErrNoDevice},
		{LibDriver, 34, ErrNoDriver},
		{LibDriver, 803, ErrNoDriver},
		{LibDriver, 801, ErrNotSupported},
		{LibCUBLAS, 3, ErrOutOfMemory},
		{LibCUBLAS, 7, ErrInvalidValue},
		{LibCUBLAS, 15, ErrNotSupported},
	}
	all := []error{ErrOutOfMemory, ErrInvalidValue, ErrNoDevice, ErrNoDriver, ErrNotSupported, ErrNoCUBLAS}
	for _, c := range cases {
		var err error = fmt.Errorf("wrapped: %w", &Error{Library: c.lib, Code: c.code})
		for _, s := range all {
			assert.Equal(t, s == c.want, errors.Is(err, s), "%s code %d vs %v", c.lib, c.code, s)
		}
	}
	// Codes without a sentinel match none, and the cuBLAS code space is
	// not confused with the driver's (3 is NOT_INITIALIZED for the driver).
	for _, s := range all {
		assert.False(t, errors.Is(&Error{Code: 3}, s))
		assert.False(t, errors.Is(&Error{Code: 700}, s))
		assert.False(t, errors.Is(&Error{Library: LibCUBLAS, Code: 13}, s))
	}
}

func TestFallbackStatusNames(t *testing.T) {
	if loadedDriver() != nil {
		t.Skip("a driver is loaded; names come from it")
	}
	e := newDriverError("cuLaunchKernel", 719, "kernel k")
	assert.Equal(t, "CUDA_ERROR_LAUNCH_FAILED", e.Name)
	assert.Equal(t, "unspecified launch failure", e.Message)
	e = newDriverError("cuX", 12345, "")
	assert.Equal(t, "CUDA_ERROR_12345", e.Name)
	assert.Equal(t, "cuda: cuX: CUDA_ERROR_12345 (12345)", e.Error())

	b := newBLASError(nil, "cublasGemmEx", 15, "GemmEx NN")
	assert.Equal(t, "CUBLAS_STATUS_NOT_SUPPORTED", b.Name)
	assert.ErrorIs(t, b, ErrNotSupported)
	assert.Contains(t, b.Error(), "cublas: cublasGemmEx (GemmEx NN): CUBLAS_STATUS_NOT_SUPPORTED (15)")
}

func TestArgErrorsWrapSentinels(t *testing.T) {
	err := invalidArg("MemAlloc", "size %d bytes: must be positive", -3)
	require.ErrorIs(t, err, ErrInvalidValue)
	assert.Equal(t, "cuda: MemAlloc: size -3 bytes: must be positive", err.Error())
	err = notSupported("MemAdvise", "driver lacks %s", "cuMemAdvise_v2")
	require.ErrorIs(t, err, ErrNotSupported)
	assert.NotErrorIs(t, err, ErrInvalidValue)
}
