//go:build !(linux || darwin || freebsd)

package cuda

import "unsafe"

// mapChunk falls back to Go memory where mmap is missing; no CUDA driver
// loads on these platforms, so the blocks are never handed to C.
func mapChunk(size int) (unsafe.Pointer, error) {
	b := make([]uint64, size/8)
	return unsafe.Pointer(&b[0]), nil
}
