//go:build !unix

package memory

import (
	"fmt"
	"sync"
	"unsafe"
)

// On systems without mmap the host backend falls back to the Go heap. The
// regions are kept reachable in live until freed, so the collector never
// reclaims memory the pool still hands out; a freed region is returned to
// the heap when the collector next runs.
var heapRegions = struct {
	sync.Mutex
	live map[uintptr][]byte
}{live: map[uintptr][]byte{}}

func mapHost(size int) ([]byte, error) {
	b := make([]byte, size)
	heapRegions.Lock()
	heapRegions.live[uintptr(unsafe.Pointer(&b[0]))] = b
	heapRegions.Unlock()
	return b, nil
}

func unmapHost(b []byte) error {
	p := uintptr(unsafe.Pointer(&b[0]))
	heapRegions.Lock()
	defer heapRegions.Unlock()
	if got, ok := heapRegions.live[p]; !ok || len(got) != len(b) {
		return fmt.Errorf("not a live heap region: %w", ErrDoubleFree)
	}
	delete(heapRegions.live, p)
	return nil
}
