package memory

import (
	"fmt"
	"unsafe"
)

// hostBackend is raw host memory obtained from the operating system page by
// page (mmap on Unix), never from the Go heap: the garbage collector never
// scans it, and a released region really goes back to the OS. Fresh
// regions read as zero.
type hostBackend struct {
	tier Tier
	name string
}

// NewHostBackend returns a backend of host memory that reports the given
// tier. Host memory can stand in for any tier: the CPU device uses a host
// backend for every tier, so the placement policy and the per-tier
// statistics mean the same on the CPU as on a GPU. On Unix it is also a
// VirtualMemory (pages of HostPageSize), so pools over it can use
// expandable segments. An expandable pool's single allocation larger than
// the memory this process may use (RAM, or its cgroup's limit, where they
// can be read) is refused with ErrOutOfMemory, as mmap refuses a classic
// segment far beyond the machine; what many smaller ones take together
// is bounded only by a HostBudget (NewBudgetBackend).
func NewHostBackend(tier Tier) Backend {
	name := "host"
	if tier != TierHost {
		name = "host(" + tier.String() + ")"
	}
	return newHostBackend(tier, name)
}

func (h *hostBackend) Name() string { return h.name }
func (h *hostBackend) Tier() Tier   { return h.tier }

func (h *hostBackend) Alloc(size int64) (Region, error) {
	if err := checkRegionSize(h.name, size); err != nil {
		return Region{}, err
	}
	b, err := mapHost(int(size))
	if err != nil {
		return Region{}, fmt.Errorf("memory: %s: allocating %s: %w", h.name, FormatBytes(size), err)
	}
	return Region{Addr: uintptr(unsafe.Pointer(&b[0])), Host: b, Size: size}, nil
}

func (h *hostBackend) Free(r Region) error {
	if r.Size <= 0 || int64(len(r.Host)) != r.Size || r.Addr != uintptr(unsafe.Pointer(&r.Host[0])) {
		return fmt.Errorf("memory: %s: free of a region that is not one of ours (addr %#x, %d bytes, host view of %d bytes): %w",
			h.name, r.Addr, r.Size, len(r.Host), ErrDoubleFree)
	}
	if err := unmapHost(r.Host); err != nil {
		return fmt.Errorf("memory: %s: freeing %s at %#x: %w", h.name, FormatBytes(r.Size), r.Addr, err)
	}
	return nil
}

func (h *hostBackend) Info() (free, total int64, ok bool) { return hostMemInfo() }
