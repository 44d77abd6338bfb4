//go:build !linux

package nccl

import (
	"errors"
	"runtime"
)

// platformSupported reports whether this build can load NCCL.
const platformSupported = false

var errPlatform = errors.New("nccl: the NCCL binding supports linux only (GOOS=" + runtime.GOOS + ")")

func dlopen(path string) (uintptr, error) { return 0, errPlatform }

func dlsym(handle uintptr, name string) (uintptr, error) { return 0, errPlatform }

// ccall is never reached on this platform: no library can be loaded, so
// no function address exists to call.
func ccall(fn uintptr, args ...uintptr) uintptr {
	panic("nccl: C call on an unsupported platform")
}

func cString(addr uintptr) string { return "" }
