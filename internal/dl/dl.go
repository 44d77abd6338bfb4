// Package dl is what strata's run-time bindings of NVIDIA's libraries
// (package cuda: the driver and cuBLAS; package nccl) share: opening a
// shared library and finding its symbols through purego (no cgo), calling
// a C function with integer and pointer arguments, reading the C strings
// they return, and the platform's library folders. Each binding keeps its
// own discovery (names, override variables, messages); only the loader is
// here. Linux is supported; elsewhere Open fails with ErrPlatform.
package dl

import (
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"unsafe"
)

// Pointer turns an address returned by C into an unsafe.Pointer. The
// memory is not Go memory, so the garbage collector ignores the pointer;
// the double indirection keeps vet's unsafeptr check quiet about a
// conversion that is correct for C memory.
func Pointer(addr uintptr) unsafe.Pointer {
	return *(*unsafe.Pointer)(unsafe.Pointer(&addr))
}

// CString copies the NUL-terminated C string at addr (at most 4 KiB); ""
// for a null pointer.
func CString(addr uintptr) string {
	if addr == 0 {
		return ""
	}
	p := Pointer(addr)
	n := 0
	for n < 4096 && *(*byte)(unsafe.Add(p, n)) != 0 {
		n++
	}
	return string(unsafe.Slice((*byte)(p), n))
}

// ArchTriplet is Debian's multiarch name of this architecture, for
// /usr/lib/<triplet>.
func ArchTriplet() string {
	if runtime.GOARCH == "arm64" {
		return "aarch64-linux-gnu"
	}
	return "x86_64-linux-gnu"
}

// ArchTarget is the CUDA toolkit's target folder name of this
// architecture, for /usr/local/cuda/targets/<target>/lib.
func ArchTarget() string {
	if runtime.GOARCH == "arm64" {
		return "sbsa-linux"
	}
	return "x86_64-linux"
}

// ToolkitDirs lists the folders where a CUDA toolkit's libraries live:
// lib64 and lib under each of the given environment variables that is
// set (CUDA_HOME, ...), /usr/local/cuda's, then the versioned toolkits'
// (/usr/local/cuda-X.Y), newest first.
func ToolkitDirs(homes ...string) []string {
	var dirs []string
	for _, env := range homes {
		if root := os.Getenv(env); root != "" {
			dirs = append(dirs, filepath.Join(root, "lib64"), filepath.Join(root, "lib"))
		}
	}
	dirs = append(dirs, "/usr/local/cuda/lib64", "/usr/local/cuda/targets/"+ArchTarget()+"/lib")
	versioned, _ := filepath.Glob("/usr/local/cuda-*/lib64")
	sort.Sort(sort.Reverse(sort.StringSlice(versioned))) // newest toolkit first
	return append(dirs, versioned...)
}
