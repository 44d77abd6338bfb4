//go:build linux

package nccl

import (
	"unsafe"

	"github.com/ebitengine/purego"
)

// platformSupported reports whether this build can load NCCL.
const platformSupported = true

// dlopen loads a shared library with RTLD_NOW so a missing dependency
// (libcudart, a CUDA driver too old) shows up here, with the loader's
// message, rather than at the first call.
func dlopen(path string) (uintptr, error) {
	return purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_LOCAL)
}

// dlsym returns the address of name in the library handle.
func dlsym(handle uintptr, name string) (uintptr, error) {
	return purego.Dlsym(handle, name)
}

// ccall calls the C function fn with integer and pointer arguments.
// Callers may convert Go pointers with uintptr(unsafe.Pointer(p)) in the
// argument list itself: go:uintptrescapes keeps the referenced Go objects
// alive and in place until the call returns (rule 4 of package unsafe).
//
//go:uintptrescapes
func ccall(fn uintptr, args ...uintptr) uintptr {
	r, _, _ := purego.SyscallN(fn, args...)
	return r
}

// cString copies the NUL-terminated C string at addr (at most 4 KiB).
func cString(addr uintptr) string {
	if addr == 0 {
		return ""
	}
	p := addrPointer(addr)
	n := 0
	for n < 4096 && *(*byte)(unsafe.Add(p, n)) != 0 {
		n++
	}
	return string(unsafe.Slice((*byte)(p), n))
}
