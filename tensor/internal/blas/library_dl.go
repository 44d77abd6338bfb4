//go:build (linux || darwin || freebsd || netbsd) && !android && (amd64 || arm64)

package blas

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"runtime"
	"strings"
	"unsafe"

	"github.com/ebitengine/purego"
)

// canLoad reports whether this build can open a library at all.
const canLoad = true

// notFound is the error of a library that is not installed, as opposed
// to one that is present but unusable; only the latter is worth
// reporting when the search goes on to other names.
type notFound string

func (e notFound) Error() string { return string(e) }

func isNotFound(err error) bool {
	var nf notFound
	return errors.As(err, &nf)
}

// openLibrary opens name (a soname or a path), binds sgemm_ and dgemm_,
// identifies the library, pins its thread pool to one thread and checks
// a small product against Go arithmetic. Any failure closes the library
// again and says why in one line.
func openLibrary(name string) (*library, error) {
	h, err := dlopen(name)
	if err != nil {
		msg := strings.TrimPrefix(err.Error(), name+": ")
		if strings.Contains(msg, "No such file") || strings.Contains(msg, "no such file") ||
			strings.Contains(msg, "image not found") {
			return nil, notFound(msg)
		}
		return nil, errors.New(msg)
	}
	l := &library{handle: h, kind: strings.SplitN(filepath.Base(name), ".", 2)[0]}
	if err := l.bind(); err != nil {
		_ = purego.Dlclose(h)
		return nil, err
	}
	l.path = symbolFile(l.sgemm, name)
	l.identify()
	if err := l.selfTest(); err != nil {
		_ = purego.Dlclose(h)
		return nil, err
	}
	return l, nil
}

// dlopen is purego.Dlopen on one OS thread: dlerror's message is the
// calling thread's, and a goroutine moved between the two calls read
// another thread's (none: an empty message).
func dlopen(name string) (uintptr, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	return purego.Dlopen(name, purego.RTLD_NOW|purego.RTLD_LOCAL)
}

// sym looks a symbol up, returning 0 when it is absent.
func (l *library) sym(name string) uintptr {
	p, err := purego.Dlsym(l.handle, name)
	if err != nil {
		return 0
	}
	return p
}

func (l *library) bind() error {
	if l.sgemm = l.sym("sgemm_"); l.sgemm == 0 {
		return errors.New("no symbol sgemm_")
	}
	if l.dgemm = l.sym("dgemm_"); l.dgemm == 0 {
		return errors.New("no symbol dgemm_")
	}
	return nil
}

// identify names the library and holds its own thread pool at one
// thread: the package splits products over goroutines itself, and a
// library pool that spins between calls (OpenBLAS's pthreads spin for up
// to 2^28 cycles) takes a core from the Go code that runs between
// products (measured in doc.go).
func (l *library) identify() {
	if cfg := l.sym("openblas_get_config"); cfg != 0 {
		l.kind = "openblas"
		cfgStr := cString(call(cfg))
		if f := strings.Fields(cfgStr); len(f) > 1 && f[0] == "OpenBLAS" {
			l.version = f[1]
		}
		if core := l.sym("openblas_get_corename"); core != 0 {
			if name := cString(call(core)); name != "" {
				l.detail = name + " kernels"
			}
		}
		if strings.Contains(cfgStr, "USE64BITINT") {
			l.detail = "ILP64"
		}
		if set := l.sym("openblas_set_num_threads"); set != 0 {
			call(set, 1)
			l.pinned = true
			if get := l.sym("openblas_get_num_threads"); get != 0 {
				l.pinned = int32(call(get)) == 1
			}
		}
		return
	}
	if ver := l.sym("bli_info_get_version_str"); ver != 0 {
		l.kind, l.version = "blis", cString(call(ver))
		if set := l.sym("bli_thread_set_num_threads"); set != 0 {
			call(set, 1)
			l.pinned = true
		}
		return
	}
	if ver := l.sym("MKL_Get_Version_String"); ver != 0 {
		l.kind = "mkl"
		buf := make([]byte, 256)
		call(ver, uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)-1))
		if end := bytes.IndexByte(buf, 0); end >= 0 {
			l.version = strings.TrimSpace(string(buf[:end]))
		}
		if set := l.sym("MKL_Set_Num_Threads"); set != 0 {
			call(set, 1)
			l.pinned = true
		}
		return
	}
	if strings.Contains(l.path, "Accelerate.framework") {
		l.kind = "accelerate"
	}
}

// selfTest runs a 3×2 product through each entry point, A transposed
// and B not (so that swapped operands, flags or leading dimensions show)
// with alpha and beta other than 1, and compares with Go arithmetic.
// It catches an ABI mismatch (an ILP64 build under an LP64 name, a
// library whose sgemm_ returns garbage) before any real work meets it.
func (l *library) selfTest() error {
	if l.detail == "ILP64" {
		return errors.New("an ILP64 build (64-bit integers); an LP64 build is needed")
	}
	if err := selfTestOne(l, l.gemm32); err != nil {
		return fmt.Errorf("sgemm_ self-test failed: %w", err)
	}
	if err := selfTestOne(l, l.gemm64); err != nil {
		return fmt.Errorf("dgemm_ self-test failed: %w", err)
	}
	return nil
}

func selfTestOne[T float](l *library, gemm func(problem[T])) error {
	// op(A) = A^T with A stored 4×3 (lda 3), op(B) = B stored 4×2 (ldb 3).
	a := []T{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
	b := []T{1, -1, 0, 2, 0.5, 0, -3, 1, 0, 0.25, 2, 0}
	c := []T{9, 9, 0, 9, 9, 0, 9, 9, 0}
	p := problem[T]{tA: true, m: 3, n: 2, k: 4, alpha: 2, beta: 0.5,
		a: a, lda: 3, b: b, ldb: 3, c: c, ldc: 3}
	want := make([]T, len(c))
	copy(want, c)
	for i := range 3 {
		for j := range 2 {
			var s T
			for q := range 4 {
				s += a[q*3+i] * b[q*3+j]
			}
			want[i*3+j] = 2*s + 0.5*want[i*3+j]
		}
	}
	gemm(p)
	for i := range c {
		if math.Abs(float64(c[i]-want[i])) > 1e-4*(1+math.Abs(float64(want[i]))) {
			return fmt.Errorf("c[%d] = %v, want %v", i, c[i], want[i])
		}
	}
	return nil
}

// symbolFile names the file that holds the symbol at addr, through
// dladdr, with symbolic links resolved; fallback is used when dladdr is
// unavailable.
func symbolFile(addr uintptr, fallback string) string {
	dladdr, err := purego.Dlsym(purego.RTLD_DEFAULT, "dladdr")
	if err != nil || dladdr == 0 {
		return fallback
	}
	info := new([4]uintptr) // Dl_info: dli_fname, dli_fbase, dli_sname, dli_saddr
	if call(dladdr, addr, uintptr(unsafe.Pointer(info))) == 0 {
		return fallback
	}
	name := cString(info[0])
	if name == "" {
		return fallback
	}
	if real, err := filepath.EvalSymlinks(name); err == nil {
		return real
	}
	return name
}

// call invokes a C function that takes only integer or pointer
// arguments and returns its integer result. Pointers converted to uintptr
// in the call expression are kept alive and off the stack, as for
// purego.SyscallN itself.
//
//go:uintptrescapes
func call(fn uintptr, args ...uintptr) uintptr {
	r, _, _ := purego.SyscallN(fn, args...)
	return r
}

// cString copies a NUL-terminated C string of at most 1 KiB.
func cString(p uintptr) string {
	if p == 0 {
		return ""
	}
	ptr := *(*unsafe.Pointer)(unsafe.Pointer(&p))
	n := 0
	for n < 1024 && *(*byte)(unsafe.Add(ptr, n)) != 0 {
		n++
	}
	return string(unsafe.Slice((*byte)(ptr), n))
}
