package memtest

import (
	"fmt"
	"sync"

	"github.com/strata-ml/strata/memory"
)

// addressBase is where AddressBackend starts handing out addresses: on 64-bit
// systems (1<<44) far from anything the Go runtime maps, so a bug that uses
// one as a host pointer faults at once; 1<<28 on 32-bit ones.
const addressBase = uintptr(1) << (28 + 16*(^uintptr(0)>>63))

// AddressBackend hands out address ranges with no memory behind them and no
// host view, like device memory seen from the CPU. Addresses are never
// reused, so ranges never overlap. It is safe for concurrent use.
type AddressBackend struct {
	tier     memory.Tier
	capacity int64

	mu    sync.Mutex
	next  uintptr
	live  map[uintptr]int64
	bytes int64
}

// NewAddressBackend returns a backend of the given tier holding at most
// capacity bytes at once (capacity > 0).
func NewAddressBackend(tier memory.Tier, capacity int64) *AddressBackend {
	return &AddressBackend{tier: tier, capacity: capacity, next: addressBase, live: map[uintptr]int64{}}
}

func (a *AddressBackend) Name() string      { return "address(" + a.tier.String() + ")" }
func (a *AddressBackend) Tier() memory.Tier { return a.tier }

// Alloc returns the next free range, 512-byte aligned.
func (a *AddressBackend) Alloc(size int64) (memory.Region, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if size <= 0 {
		return memory.Region{}, fmt.Errorf("memtest: %s: cannot allocate %d bytes: %w", a.Name(), size, memory.ErrInvalidArgument)
	}
	if size > a.capacity-a.bytes {
		return memory.Region{}, fmt.Errorf("memtest: %s: %d of %d bytes in use, cannot allocate %d more: %w",
			a.Name(), a.bytes, a.capacity, size, memory.ErrOutOfMemory)
	}
	addr := a.next
	a.next += uintptr(size+memory.MinBlockSize-1) &^ (memory.MinBlockSize - 1)
	a.live[addr] = size
	a.bytes += size
	return memory.Region{Addr: addr, Size: size}, nil
}

// Free takes back a live range.
func (a *AddressBackend) Free(r memory.Region) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	size, ok := a.live[r.Addr]
	if !ok || size != r.Size {
		return fmt.Errorf("memtest: %s: free of range at %#x (%d bytes) that is not live: %w", a.Name(), r.Addr, r.Size, memory.ErrDoubleFree)
	}
	delete(a.live, r.Addr)
	a.bytes -= size
	return nil
}

// Info reports the capacity left.
func (a *AddressBackend) Info() (free, total int64, ok bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.capacity - a.bytes, a.capacity, true
}

// Live returns the number and bytes of ranges handed out and not freed.
func (a *AddressBackend) Live() (regions int, bytes int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.live), a.bytes
}
