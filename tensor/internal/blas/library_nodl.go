//go:build !((linux || darwin || freebsd || netbsd) && !android && (amd64 || arm64))

package blas

import (
	"errors"
	"runtime"
)

// Without purego's dynamic loader (Windows, Android, 32-bit and other
// architectures) every product runs on the gonum fallback.

const canLoad = false

func isNotFound(error) bool { return false }

func openLibrary(name string) (*library, error) {
	return nil, errors.New("loading a library is not supported on " + runtime.GOOS + "/" + runtime.GOARCH)
}

func (l *library) gemm32(p problem[float32]) { gonumGemm32(p) }
func (l *library) gemm64(p problem[float64]) { gonumGemm64(p) }
