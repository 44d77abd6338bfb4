package blas

import (
	"fmt"
	"os"
	"runtime"
	"strings"
)

// library is a system BLAS opened at run time. Only the LP64 Fortran
// entry points sgemm_ and dgemm_ are called: every BLAS exports them
// (OpenBLAS, BLIS, MKL, Accelerate, reference BLAS) and they take all
// their arguments by address, which purego.SyscallN can pass; the CBLAS
// entry points take alpha and beta in float registers alongside integer
// arguments, which SyscallN cannot pass, and purego's typed RegisterFunc
// wrapper costs 0.57 µs and 12 allocations a call against SyscallN's
// 0.17 µs and none (measured; see doc.go).
type library struct {
	kind    string // "openblas", "blis", "mkl", or the file's base name
	version string // e.g. "0.3.21"; "" when the library does not say
	detail  string // e.g. "Zen kernels"; "" when unknown
	path    string // the file the symbols were found in
	pinned  bool   // the library's own thread pool is held at 1 thread

	handle, sgemm, dgemm uintptr
}

// describe is the library part of Backend().
func (l *library) describe() string {
	var b strings.Builder
	b.WriteString(l.kind)
	if l.version != "" {
		b.WriteString(" " + l.version)
	}
	b.WriteString(" (")
	if l.detail != "" {
		b.WriteString(l.detail + ", ")
	}
	b.WriteString(l.path)
	b.WriteString(")")
	if !l.pinned {
		b.WriteString(", its own threading not controlled")
	}
	return b.String()
}

// envVar names the override: a path to a BLAS library, "go" for the
// fallback without a library (the package's own float32 kernel where the
// CPU has it), or "gonum" for gonum alone.
const envVar = "STRATA_BLAS"

// forcedGonum reports whether STRATA_BLAS=gonum asks for gonum alone.
func forcedGonum() bool {
	return strings.EqualFold(strings.TrimSpace(os.Getenv(envVar)), "gonum")
}

// candidates lists the libraries tried in order when STRATA_BLAS is
// unset: optimized BLAS builds only, by soname first (the dynamic
// linker's search path, LD_LIBRARY_PATH and distribution alternatives
// decide which file that is) and then by the paths that upstream
// installs use. Generic names such as libblas.so.3 are left out on
// purpose: they are often reference BLAS, slower than the gonum fallback
// on two cores; name one through STRATA_BLAS to use it.
func candidates() []string {
	switch runtime.GOOS {
	case "darwin":
		return []string{
			"/opt/homebrew/opt/openblas/lib/libopenblas.dylib",
			"/usr/local/opt/openblas/lib/libopenblas.dylib",
			"libopenblas.dylib",
			"/System/Library/Frameworks/Accelerate.framework/Accelerate",
		}
	default:
		return []string{
			"libopenblas.so.0",  // Debian, Ubuntu (libopenblas0-*), Arch, Alpine
			"libopenblasp.so.0", // Fedora, RHEL: the pthreads build
			"libopenblas.so",
			"/opt/OpenBLAS/lib/libopenblas.so", // upstream `make install`
			"/usr/local/lib/libopenblas.so",    // FreeBSD ports, local builds
			"libmkl_rt.so.2",
			"libmkl_rt.so",
			"libblis.so.4",
			"libblis.so.3",
		}
	}
}

// discover picks the library the process will use, following STRATA_BLAS
// when set. It returns nil and a one-line reason when a fallback is to be
// used (fallbackBackend picks which).
func discover() (*library, string) {
	env := strings.TrimSpace(os.Getenv(envVar))
	if low := strings.ToLower(env); low == "gonum" || low == "go" {
		return nil, fmt.Sprintf("forced by %s=%s", envVar, env)
	}
	if !canLoad {
		return nil, fmt.Sprintf("no library loading on %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	defer loadEnv()()
	if env != "" {
		l, err := openLibrary(env)
		if err != nil {
			return nil, fmt.Sprintf("%s=%s: %v", envVar, env, err)
		}
		return l, ""
	}
	var problems []string
	names := candidates()
	for _, name := range names {
		l, err := openLibrary(name)
		if err == nil {
			return l, ""
		}
		if !isNotFound(err) {
			problems = append(problems, fmt.Sprintf("%s: %v", name, err))
		}
	}
	if len(problems) > 0 {
		return nil, "no usable BLAS library: " + strings.Join(problems, "; ")
	}
	return nil, fmt.Sprintf("no BLAS library found; tried %s", strings.Join(names, ", "))
}
