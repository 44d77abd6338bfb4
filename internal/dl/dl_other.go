//go:build !linux

package dl

import (
	"errors"
	"runtime"
)

// Supported reports whether this build can load shared libraries.
const Supported = false

// ErrPlatform is Open's error where shared libraries cannot be loaded.
var ErrPlatform = errors.New("loading NVIDIA's libraries is supported on linux only (GOOS=" + runtime.GOOS + ")")

// Open fails with ErrPlatform.
func Open(path string) (uintptr, error) { return 0, ErrPlatform }

// Sym fails with ErrPlatform.
func Sym(handle uintptr, name string) (uintptr, error) { return 0, ErrPlatform }

// Call is never reached on this platform: no library can be loaded, so no
// function address exists to call.
func Call(fn uintptr, args ...uintptr) uintptr {
	panic("dl: C call on an unsupported platform")
}
