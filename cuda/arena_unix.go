//go:build linux || darwin || freebsd

package cuda

import (
	"syscall"
	"unsafe"
)

// mapChunk maps size bytes of zeroed anonymous memory, outside the Go heap.
func mapChunk(size int) (unsafe.Pointer, error) {
	b, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		return nil, err
	}
	return unsafe.Pointer(&b[0]), nil
}
