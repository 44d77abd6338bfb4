//go:build !linux

package cuda

import (
	"errors"
	"runtime"
)

// platformSupported reports whether this build can load NVIDIA libraries.
const platformSupported = false

var errPlatform = errors.New("cuda: the CUDA binding supports linux only (GOOS=" + runtime.GOOS + ")")

func dlopen(path string) (uintptr, error) { return 0, errPlatform }

func dlsym(handle uintptr, name string) (uintptr, error) { return 0, errPlatform }

// ccall is never reached on this platform: no library can be loaded, so
// no function address exists to call.
func ccall(fn uintptr, args ...uintptr) uintptr {
	panic("cuda: C call on an unsupported platform")
}

func (f *frame) call(fn uintptr, args ...uintptr) uintptr {
	panic("cuda: C call on an unsupported platform")
}
