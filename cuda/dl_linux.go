//go:build linux

package cuda

import (
	"github.com/ebitengine/purego"

	"github.com/strata-ml/strata/internal/dl"
)

// platformSupported reports whether this build can load NVIDIA libraries.
const platformSupported = true

// dlopen and dlsym are internal/dl's (shared with package nccl).
func dlopen(path string) (uintptr, error)                { return dl.Open(path) }
func dlsym(handle uintptr, name string) (uintptr, error) { return dl.Sym(handle, name) }

// ccall calls the C function fn with integer and pointer arguments, and
// counts the call (DriverCalls). Callers may convert Go pointers with
// uintptr(unsafe.Pointer(p)) in the argument list itself: the
// uintptrescapes directive keeps the referenced Go objects alive and in
// place until the call returns (rule 4 of package unsafe). It allocates the
// variadic slice; calls whose arguments hold no Go pointers use
// frame.call instead, which does not.
//
//go:uintptrescapes
func ccall(fn uintptr, args ...uintptr) uintptr {
	r := dl.Call(fn, args...)
	driverCalls.Add(1)
	return r
}

// call calls the C function fn with args, which must hold only integers,
// handles, device pointers and addresses of memory that is not on a Go
// stack (C memory, or the frame's own out slots). The arguments are copied
// into the frame, so neither the variadic slice nor the frame escape per
// call: no Go allocation. More than maxCallArgs is a binding bug: it
// panics rather than drop the excess.
func (f *frame) call(fn uintptr, args ...uintptr) uintptr {
	if len(args) > maxCallArgs {
		panic("cuda: C call with more than maxCallArgs arguments")
	}
	n := copy(f.args[:], args)
	r, _, _ := purego.SyscallN(fn, f.args[:n]...)
	driverCalls.Add(1)
	return r
}
