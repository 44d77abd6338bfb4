// Package dl is what strata's run-time bindings of NVIDIA's libraries
// (package cuda: the driver and cuBLAS; package nccl) share: opening a
// shared library and finding its symbols through purego (no cgo), calling
// a C function with integer and pointer arguments, reading the C strings
// they return, and the platform's library folders. Each binding keeps its
// own discovery (names, override variables, messages); only the loader is
// here. Linux is supported; elsewhere Open fails with ErrPlatform.
package dl

import (
	"cmp"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
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
	versioned, _ := glob("/usr/local/cuda-*/lib64")
	// Newest toolkit first, by version number: in the names' byte order
	// cuda-9.2 came before cuda-12.4, and 12.10 would follow 12.9.
	slices.SortStableFunc(versioned, func(a, b string) int { return compareVersions(toolkitVersion(b), toolkitVersion(a)) })
	return append(dirs, versioned...)
}

// glob is filepath.Glob (tests: folders of toolkits not installed here).
var glob = filepath.Glob

// toolkitVersion is the X.Y of a /usr/local/cuda-X.Y/lib64 folder.
func toolkitVersion(dir string) string {
	return strings.TrimPrefix(filepath.Base(filepath.Dir(dir)), "cuda-")
}

// compareVersions compares dotted versions field by field, numbers as
// numbers (9 < 12) and other fields as text; a version that is a prefix
// of the other ("12" and "12.4") is the older.
func compareVersions(a, b string) int {
	af, bf := strings.Split(a, "."), strings.Split(b, ".")
	for i := range min(len(af), len(bf)) {
		x, errX := strconv.Atoi(af[i])
		y, errY := strconv.Atoi(bf[i])
		c := cmp.Compare(x, y)
		if errX != nil || errY != nil {
			c = strings.Compare(af[i], bf[i])
		}
		if c != 0 {
			return c
		}
	}
	return cmp.Compare(len(af), len(bf))
}
