package cuda

import "strconv"

// CUresult values this package acts on (cuda.h).
const (
	cudaSuccess                         = 0
	cudaErrorInvalidValue               = 1
	cudaErrorOutOfMemory                = 2
	cudaErrorNotInitialized             = 3
	cudaErrorStubLibrary                = 34
	cudaErrorNoDevice                   = 100
	cudaErrorInvalidDevice              = 101
	cudaErrorInvalidContext             = 201
	cudaErrorOperatingSystem            = 304
	cudaErrorNotReady                   = 600
	cudaErrorNotSupported               = 801
	cudaErrorSystemDriverMismatch       = 803
	cudaErrorCompatNotSupportedOnDevice = 804
	cudaErrorUnknown                    = 999
)

// cublasStatus_t values (cublas_api.h).
const (
	cublasStatusSuccess         = 0
	cublasStatusNotInitialized  = 1
	cublasStatusAllocFailed     = 3
	cublasStatusInvalidValue    = 7
	cublasStatusArchMismatch    = 8
	cublasStatusMappingError    = 11
	cublasStatusExecutionFailed = 13
	cublasStatusInternalError   = 14
	cublasStatusNotSupported    = 15
	cublasStatusLicenseError    = 16
)

// statusText is a name and description for a status code, used when the
// library itself cannot describe it (not loaded, or too old to know).
type statusText struct{ name, msg string }

var driverStatusText = map[int]statusText{
	0:   {"CUDA_SUCCESS", "no error"},
	1:   {"CUDA_ERROR_INVALID_VALUE", "invalid argument"},
	2:   {"CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
	3:   {"CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
	4:   {"CUDA_ERROR_DEINITIALIZED", "driver shutting down"},
	34:  {"CUDA_ERROR_STUB_LIBRARY", "CUDA driver is a stub library"},
	46:  {"CUDA_ERROR_DEVICE_UNAVAILABLE", "CUDA-capable device(s) is/are busy or unavailable"},
	100: {"CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
	101: {"CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
	200: {"CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"},
	201: {"CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
	209: {"CUDA_ERROR_NO_BINARY_FOR_GPU", "no kernel image is available for execution on the device"},
	218: {"CUDA_ERROR_INVALID_PTX", "a PTX JIT compilation failed"},
	222: {"CUDA_ERROR_UNSUPPORTED_PTX_VERSION", "the provided PTX was compiled with an unsupported toolchain"},
	304: {"CUDA_ERROR_OPERATING_SYSTEM", "OS call failed or operation not supported on this OS"},
	400: {"CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
	500: {"CUDA_ERROR_NOT_FOUND", "named symbol not found"},
	600: {"CUDA_ERROR_NOT_READY", "device not ready"},
	700: {"CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered"},
	701: {"CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", "too many resources requested for launch"},
	719: {"CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"},
	801: {"CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
	803: {"CUDA_ERROR_SYSTEM_DRIVER_MISMATCH", "system has unsupported display driver / cuda driver combination"},
	804: {"CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE", "forward compatibility was attempted on non supported HW"},
	999: {"CUDA_ERROR_UNKNOWN", "unknown error"},
}

var cublasStatusText = map[int]statusText{
	0:  {"CUBLAS_STATUS_SUCCESS", "success"},
	1:  {"CUBLAS_STATUS_NOT_INITIALIZED", "the library was not initialized"},
	3:  {"CUBLAS_STATUS_ALLOC_FAILED", "the resource allocation failed"},
	7:  {"CUBLAS_STATUS_INVALID_VALUE", "an invalid numeric value was used as an argument"},
	8:  {"CUBLAS_STATUS_ARCH_MISMATCH", "an absent device architectural feature is required"},
	11: {"CUBLAS_STATUS_MAPPING_ERROR", "an access to GPU memory space failed"},
	13: {"CUBLAS_STATUS_EXECUTION_FAILED", "the GPU program failed to execute"},
	14: {"CUBLAS_STATUS_INTERNAL_ERROR", "an internal operation failed"},
	15: {"CUBLAS_STATUS_NOT_SUPPORTED", "the functionality requested is not supported"},
	16: {"CUBLAS_STATUS_LICENSE_ERROR", "the functionality requested requires some license"},
}

func fallbackText(table map[int]statusText, prefix string, code int) statusText {
	if t, ok := table[code]; ok {
		return t
	}
	return statusText{prefix + strconv.Itoa(code), ""}
}

// newDriverError describes a failed driver call. It asks the loaded
// driver for the code's name and description (two more driver calls, on
// the failure path only) and falls back to the table above.
func newDriverError(call string, code uint32, detail string) *Error {
	if d := loadedDriver(); d != nil {
		return d.newError(call, code, detail)
	}
	e := &Error{Library: LibDriver, Call: call, Detail: detail, Code: int(int32(code))}
	t := fallbackText(driverStatusText, "CUDA_ERROR_", e.Code)
	e.Name, e.Message = t.name, t.msg
	return e
}

// newBLASError describes a failed cuBLAS call, asking the library for
// names when it is new enough to have cublasGetStatusName.
func newBLASError(lib *blasLib, call string, status uint32, detail string) *Error {
	e := &Error{Library: LibCUBLAS, Call: call, Detail: detail, Code: int(int32(status))}
	t := fallbackText(cublasStatusText, "CUBLAS_STATUS_", e.Code)
	e.Name, e.Message = t.name, t.msg
	if lib != nil {
		if lib.getStatusName != 0 {
			if s := cString(ccall(lib.getStatusName, uintptr(status))); s != "" {
				e.Name = s
			}
		}
		if lib.getStatusString != 0 {
			if s := cString(ccall(lib.getStatusString, uintptr(status))); s != "" {
				e.Message = s
			}
		}
	}
	return e
}
