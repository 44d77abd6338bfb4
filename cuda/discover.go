package cuda

import (
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"

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

// libSpec says where to look for one library and how to explain failure.
type libSpec struct {
	what  string   // "the CUDA driver (libcuda)"
	env   string   // override variable
	names []string // sonames, resolved by the dynamic loader's own search
	dirs  []string // directories tried after the names, when the file exists
	fix   string   // how to fix a failure, for the error message
	kind  error    // sentinel the failure wraps
}

func driverSpec() libSpec {
	return libSpec{
		what:  "the CUDA driver library (libcuda)",
		env:   EnvCUDALib,
		names: []string{"libcuda.so.1", "libcuda.so"},
		dirs:  []string{"/usr/lib/" + archTriplet(), "/usr/lib64", "/usr/lib/wsl/lib", "/usr/local/nvidia/lib64"},
		fix: "install the NVIDIA driver for CUDA 12 or newer (it provides libcuda.so.1) " +
			"or set " + EnvCUDALib + " to the full path of libcuda.so.1",
		kind: ErrNoDriver,
	}
}

func cublasSpec() libSpec {
	var dirs []string
	for _, env := range []string{"CUDA_HOME", "CUDA_PATH"} {
		if root := os.Getenv(env); root != "" {
			dirs = append(dirs, filepath.Join(root, "lib64"), filepath.Join(root, "lib"))
		}
	}
	dirs = append(dirs, "/usr/local/cuda/lib64", "/usr/local/cuda/targets/"+archTarget()+"/lib")
	versioned, _ := filepath.Glob("/usr/local/cuda-*/lib64")
	sort.Sort(sort.Reverse(sort.StringSlice(versioned))) // newest toolkit first
	dirs = append(dirs, versioned...)
	dirs = append(dirs, "/usr/lib/"+archTriplet())
	return libSpec{
		what:  "cuBLAS (libcublas)",
		env:   EnvCUBLASLib,
		names: []string{"libcublas.so.13", "libcublas.so.12", "libcublas.so"},
		dirs:  dirs,
		fix: "install cuBLAS from the CUDA toolkit (13.x or 12.x), add its lib64 folder to LD_LIBRARY_PATH, " +
			"or set " + EnvCUBLASLib + " to the full path of libcublas.so.13",
		kind: ErrNoCUBLAS,
	}
}

func archTriplet() string { return dl.ArchTriplet() }
func archTarget() string  { return dl.ArchTarget() }

// attempt is one file the loader tried and why it failed.
type attempt struct{ path, err string }

// loadError explains a failed discovery: every candidate tried, why each
// failed, and what to do about it.
type loadError struct {
	spec  libSpec
	env   string // value of spec.env when set
	tried []attempt
}

func (e *loadError) Error() string {
	var b strings.Builder
	b.WriteString("cuda: cannot load ")
	b.WriteString(e.spec.what)
	if e.env != "" {
		b.WriteString(" from " + e.spec.env + "=" + e.env)
	}
	b.WriteString(": tried ")
	for i, a := range e.tried {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(a.path + " (" + a.err + ")")
	}
	if e.env != "" {
		b.WriteString(": point " + e.spec.env + " at the library file, or unset it to search the default locations")
	} else {
		b.WriteString(": " + e.spec.fix)
	}
	return b.String()
}

func (e *loadError) Unwrap() error { return e.spec.kind }

// openLibrary finds and loads the library spec describes, returning its
// handle and the path that worked. getenv is os.Getenv outside tests.
func openLibrary(spec libSpec, getenv func(string) string) (uintptr, string, error) {
	if !platformSupported {
		_, err := dlopen("")
		return 0, "", &loadError{spec: spec, tried: []attempt{{spec.names[0], err.Error()}}}
	}
	if p := getenv(spec.env); p != "" {
		h, err := dlopen(p)
		if err != nil {
			return 0, "", &loadError{spec: spec, env: p, tried: []attempt{{p, dlMessage(err)}}}
		}
		return h, p, nil
	}
	le := &loadError{spec: spec}
	for _, name := range spec.names {
		h, err := dlopen(name)
		if err == nil {
			return h, name, nil
		}
		le.tried = append(le.tried, attempt{name, dlMessage(err)})
	}
	for _, dir := range spec.dirs {
		for _, name := range spec.names {
			p := filepath.Join(dir, name)
			if _, err := os.Stat(p); err != nil {
				continue
			}
			h, err := dlopen(p)
			if err == nil {
				return h, p, nil
			}
			le.tried = append(le.tried, attempt{p, dlMessage(err)})
		}
	}
	return 0, "", le
}

// dlMessage trims the loader's message to what matters.
func dlMessage(err error) string {
	return strings.TrimSpace(strings.TrimPrefix(err.Error(), "dlopen: "))
}
