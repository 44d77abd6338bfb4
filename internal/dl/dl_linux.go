//go:build linux

package dl

import (
	"runtime"

	"github.com/ebitengine/purego"
)

// Supported reports whether this build can load shared libraries.
const Supported = true

// Open loads a shared library with RTLD_NOW, so that a missing dependency
// shows up here, with the loader's message, rather than at the first call.
// The goroutine stays on one OS thread for the call: dlerror's message is
// the calling thread's, and read on another thread it is lost (an empty
// error; seen intermittently loading OpenBLAS under load).
func Open(path string) (uintptr, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	return purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_LOCAL)
}

// Sym returns the address of name in the library handle (on one OS
// thread, as Open).
func Sym(handle uintptr, name string) (uintptr, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	return purego.Dlsym(handle, name)
}

// Call calls the C function fn with integer and pointer arguments.
// Callers may convert Go pointers with uintptr(unsafe.Pointer(p)) in the
// argument list itself: go:uintptrescapes keeps the referenced Go objects
// alive and in place until the call returns (rule 4 of package unsafe). It
// allocates the variadic slice.
//
//go:uintptrescapes
func Call(fn uintptr, args ...uintptr) uintptr {
	r, _, _ := purego.SyscallN(fn, args...)
	return r
}
