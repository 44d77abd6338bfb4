//go:build unix

package memory

import (
	"errors"
	"fmt"
	"syscall"
)

// mapHost maps size bytes of anonymous, private, zeroed memory.
func mapHost(size int) ([]byte, error) {
	b, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		if errors.Is(err, syscall.ENOMEM) || errors.Is(err, syscall.EAGAIN) {
			return nil, fmt.Errorf("mmap: %w (%w)", ErrOutOfMemory, err)
		}
		return nil, fmt.Errorf("mmap: %w", err)
	}
	return b, nil
}

// unmapHost unmaps a slice returned by mapHost. The syscall package keeps
// the set of live mappings, so unmapping one twice, or a slice it never
// returned, is an error rather than a fault.
func unmapHost(b []byte) error {
	if err := syscall.Munmap(b); err != nil {
		if errors.Is(err, syscall.EINVAL) {
			return fmt.Errorf("munmap: not a live mapping: %w (%w)", ErrDoubleFree, err)
		}
		return fmt.Errorf("munmap: %w", err)
	}
	return nil
}
