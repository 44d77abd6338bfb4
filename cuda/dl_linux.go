//go:build linux

package cuda

import (
	"github.com/ebitengine/purego"
)

// platformSupported reports whether this build can load NVIDIA libraries.
const platformSupported = true

// dlopen loads a shared library with RTLD_NOW so a missing dependency
// shows up here, with the loader's message, rather than at the first call.
func dlopen(path string) (uintptr, error) {
	return purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_LOCAL)
}

// dlsym returns the address of name in the library handle.
func dlsym(handle uintptr, name string) (uintptr, error) {
	return purego.Dlsym(handle, name)
}

// ccall calls the C function fn with integer and pointer arguments. Callers
// may convert Go pointers with uintptr(unsafe.Pointer(p)) in the argument
// list itself: go:uintptrescapes keeps the referenced Go objects alive and
// in place until the call returns (rule 4 of package unsafe). It allocates
// the variadic slice; calls whose arguments hold no Go pointers use
// frame.call instead, which does not.
//
//go:uintptrescapes
func ccall(fn uintptr, args ...uintptr) uintptr {
	r, _, _ := purego.SyscallN(fn, args...)
	driverCalls.Add(1)
	return r
}

// call calls the C function fn with args, which must hold only integers,
// handles, device pointers and addresses of memory that is not on a Go
// stack (C memory, or the frame's own out slots). The arguments are copied
// into the frame, so neither the variadic slice nor the frame escape per
// call: no Go allocation.
func (f *frame) call(fn uintptr, args ...uintptr) uintptr {
	n := copy(f.args[:], args)
	r, _, _ := purego.SyscallN(fn, f.args[:n]...)
	driverCalls.Add(1)
	return r
}
