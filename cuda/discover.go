package cuda

import (
	"errors"

	"github.com/strata-ml/strata/internal/dl"
)

// Environment variables that override library discovery. When one is set,
// only the file it names is tried.
const (
	EnvCUDALib   = "STRATA_CUDA_LIB"
	EnvCUBLASLib = "STRATA_CUBLAS_LIB"
)

// ErrNoCUBLAS: libcublas could not be loaded or lacks a function this
// package calls.
var ErrNoCUBLAS = errors.New("cuda: cuBLAS library not available")

// libSpec says where to look for one library and how to explain failure
// (internal/dl's, shared with package nccl).
type libSpec = dl.Spec

func driverSpec() libSpec {
	return libSpec{
		Pkg:   "cuda",
		What:  "the CUDA driver library (libcuda)",
		Env:   EnvCUDALib,
		Names: []string{"libcuda.so.1", "libcuda.so"},
		Dirs:  []string{"/usr/lib/" + archTriplet(), "/usr/lib64", "/usr/lib/wsl/lib", "/usr/local/nvidia/lib64"},
		Fix: "install the NVIDIA driver for CUDA 13 or newer (it provides libcuda.so.1; strata's kernels are built with CUDA 13) " +
			"or set " + EnvCUDALib + " to the full path of libcuda.so.1",
		Kind: ErrNoDriver,
	}
}

func cublasSpec() libSpec {
	dirs := append(dl.ToolkitDirs("CUDA_HOME", "CUDA_PATH"), "/usr/lib/"+archTriplet())
	return libSpec{
		Pkg:   "cuda",
		What:  "cuBLAS (libcublas)",
		Env:   EnvCUBLASLib,
		Names: []string{"libcublas.so.13", "libcublas.so.12", "libcublas.so"},
		Dirs:  dirs,
		Fix: "install cuBLAS from the CUDA toolkit (13.x or 12.x), add its lib64 folder to LD_LIBRARY_PATH, " +
			"or set " + EnvCUBLASLib + " to the full path of libcublas.so.13",
		Kind: ErrNoCUBLAS,
	}
}

func archTriplet() string { return dl.ArchTriplet() }

// loadError is a failed discovery (internal/dl's).
type loadError = dl.LoadError

// openLibrary finds and loads the library spec describes, returning its
// handle and the path that worked. getenv is os.Getenv outside tests.
func openLibrary(spec libSpec, getenv func(string) string) (uintptr, string, error) {
	return dl.Find(spec, getenv, dlopen)
}
