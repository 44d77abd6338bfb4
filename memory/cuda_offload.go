package memory

import (
	"fmt"
	"strings"

	"github.com/strata-ml/strata/cuda"
)

// offloadBackend is TierOffload on a GPU: CUDA managed memory whose pages
// prefer the host and are mapped by the device (cuMemAdvise
// SetPreferredLocation=CPU and SetAccessedBy=device on every region), so
// kernels read and write them over the bus without faulting them over,
// as llm.c's fallback does. Unlike the managed backend it may hold more
// than the device's memory: it is bounded by host memory instead.
//
// With pinned set (NewPinnedOffloadBackend) the regions are mapped
// page-locked host memory instead (cuMemHostAlloc with DEVICEMAP and
// PORTABLE, as the staging tier): the same zero-copy access from kernels,
// through the GPU's mappings of pinned pages rather than of managed ones,
// at the price of page-locking the host memory the tier holds.
type offloadBackend struct {
	ctx    *cuda.Context
	name   string
	limit  int64 // most live bytes; see NewOffloadBackend
	what   string
	pinned bool
	live   liveRegions
}

// EnvOffloadMemory is the environment variable NewCUDAManager reads for
// the offload tier's memory: "pinned" (the default: mapped page-locked host
// memory) or "managed" (unified memory preferring the host). Kernels read
// both over the bus at one speed (gpt2-medium's AdamW update under 4 GiB on
// the H200: 55.0 against 55.1 ms, session 23), but the copy engines reach
// pinned memory at the bus's full speed both ways at once and managed
// memory at about half (examples/bench-link): the pipelined update's copy
// ring (tensor) needs pinned memory, and with managed moments it ran at
// half the speed of the kernel reading them itself.
const EnvOffloadMemory = "STRATA_OFFLOAD_MEMORY"

// offloadPinned reads v, EnvOffloadMemory's value: whether the offload
// tier is pinned memory.
func offloadPinned(v string) (bool, error) {
	switch strings.ToLower(v) {
	case "managed":
		return false, nil
	case "", "pinned":
		return true, nil
	default:
		return false, fmt.Errorf("memory: %s=%q: want managed or pinned: %w", EnvOffloadMemory, v, ErrInvalidArgument)
	}
}

// DefaultOffloadShare is the share of the memory this process may use
// (the smaller of RAM and the cgroup limit) that the offload tier may
// hold by default.
const DefaultOffloadShare = 0.5

// NewOffloadBackend returns the TierOffload backend of ctx's device,
// holding at most limit live bytes; limit 0 means DefaultOffloadShare of
// the memory this process may use, and with neither RAM nor a cgroup
// limit readable, 16 GiB. A request past the limit fails with an error
// wrapping ErrOutOfMemory without asking the driver. It panics if ctx is
// nil (a programming error).
func NewOffloadBackend(ctx *cuda.Context, limit int64) Backend {
	if ctx == nil {
		panic("memory: NewOffloadBackend: nil *cuda.Context")
	}
	what := "the limit asked for"
	if limit <= 0 {
		limit, what = defaultOffloadLimit()
	}
	return &offloadBackend{ctx: ctx, name: ctx.Device().String() + " offload", limit: limit, what: what}
}

// NewPinnedOffloadBackend is NewOffloadBackend over mapped page-locked
// host memory instead of managed memory (see offloadBackend), with the
// same limit. The device must be able to map host memory.
func NewPinnedOffloadBackend(ctx *cuda.Context, limit int64) Backend {
	b := NewOffloadBackend(ctx, limit).(*offloadBackend)
	b.pinned = true
	b.name = ctx.Device().String() + " pinned"
	return b
}

// defaultOffloadLimit is DefaultOffloadShare of the memory this process
// may use, with what it is, for messages.
func defaultOffloadLimit() (int64, string) {
	l, what := hostMemoryLimit()
	if l <= 0 {
		return 16 << 30, "16 GiB (host memory unknown)"
	}
	return int64(float64(l) * DefaultOffloadShare), fmt.Sprintf("%.0f%% of the %s %s", 100*DefaultOffloadShare, FormatBytes(l), what)
}

func (o *offloadBackend) Name() string { return o.name }
func (o *offloadBackend) Tier() Tier   { return TierOffload }

func (o *offloadBackend) Alloc(size int64) (Region, error) {
	if err := checkRegionSize(o.name, size); err != nil {
		return Region{}, err
	}
	if live := o.live.total(); live+size > o.limit {
		return Region{}, fmt.Errorf("memory: %s: refusing %s: %s is out and the offload tier holds at most %s (%s): %w",
			o.name, FormatBytes(size), FormatBytes(live), FormatBytes(o.limit), o.what, ErrOutOfMemory)
	}
	if o.pinned {
		return o.allocPinned(size)
	}
	p, err := o.ctx.MemAllocManaged(int(size))
	if err != nil {
		return Region{}, driverAllocError(o.name, size, err)
	}
	dev := cuda.DeviceLocation(o.ctx.Device())
	for _, a := range [...]struct {
		adv cuda.Advice
		loc cuda.Location
	}{{cuda.AdviseSetPreferredLocation, cuda.HostLocation()}, {cuda.AdviseSetAccessedBy, dev}} {
		if err := o.ctx.MemAdvise(p, int(size), a.adv, a.loc); err != nil {
			_ = o.ctx.MemFree(p)
			return Region{}, fmt.Errorf("memory: %s: %s on %s: %w", o.name, a.adv, FormatBytes(size), err)
		}
	}
	r := Region{Addr: uintptr(p), Host: cuda.UnsafeHostView(p, int(size)), Size: size}
	o.live.add(r.Addr, size, nil)
	return r, nil
}

// allocPinned is Alloc over mapped page-locked memory.
func (o *offloadBackend) allocPinned(size int64) (Region, error) {
	return allocMapped(o.ctx, &o.live, o.name, size, cuda.HostAllocDeviceMap|cuda.HostAllocPortable)
}

func (o *offloadBackend) Free(r Region) error {
	if o.pinned {
		return freeMapped(o.ctx, &o.live, o.name, r)
	}
	return o.live.memFree(o.ctx, o.name, r)
}

// HostPinned reports whether tier t's memory is page-locked host memory,
// which the copy engines reach at the bus's full speed in both directions
// at once: the staging tier, and the offload tier over pinned memory
// (NewPinnedOffloadBackend, the CUDA manager's default).
func (m *Manager) HostPinned(t Tier) bool {
	if t >= NumTiers {
		return false
	}
	m.mu.Lock()
	p := m.pools[t]
	m.mu.Unlock()
	if p == nil {
		return false
	}
	switch b := p.backend.(type) {
	case *stagingBackend:
		return true
	case *offloadBackend:
		return b.pinned
	}
	return false
}

// Info reports the tier's limit and what is left of it.
func (o *offloadBackend) Info() (free, total int64, ok bool) {
	return max(0, o.limit-o.live.total()), o.limit, true
}
