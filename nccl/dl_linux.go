//go:build linux

package nccl

import "github.com/strata-ml/strata/internal/dl"

// platformSupported reports whether this build can load NCCL.
const platformSupported = true

// dlopen, dlsym and cString are internal/dl's (shared with package cuda).
// dlopen uses RTLD_NOW, so a missing dependency (libcudart, a CUDA driver
// too old) shows up here, with the loader's message, rather than at the
// first call.
func dlopen(path string) (uintptr, error)                { return dl.Open(path) }
func dlsym(handle uintptr, name string) (uintptr, error) { return dl.Sym(handle, name) }
func cString(addr uintptr) string                        { return dl.CString(addr) }

// ccall calls the C function fn with integer and pointer arguments.
// Callers may convert Go pointers with uintptr(unsafe.Pointer(p)) in the
// argument list itself: go:uintptrescapes keeps the referenced Go objects
// alive and in place until the call returns (rule 4 of package unsafe).
//
//go:uintptrescapes
func ccall(fn uintptr, args ...uintptr) uintptr { return dl.Call(fn, args...) }
