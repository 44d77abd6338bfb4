package memory

// Region is a span of raw memory handed out by a Backend.
type Region struct {
	// Addr is the address the owning device uses (a host address for host
	// memory, a device pointer for device and managed memory, the device
	// alias for mapped staging memory).
	Addr uintptr
	// Host is the same bytes seen from the CPU, or nil when the CPU cannot
	// address them directly (plain device memory).
	Host []byte
	// Size is the length in bytes.
	Size int64
}

// Backend is raw memory of one tier: the thing a Pool caches. It is kept
// small on purpose: every tier (host, device, managed, staging) and every
// adaptor (limits, fault injection in tests) implements these few methods.
// Implementations must be safe for use by one goroutine at a time; the Pool
// serialises calls.
type Backend interface {
	// Name describes the backend for summaries and errors ("host", "cuda:0 device", ...).
	Name() string
	// Tier is the tier this backend provides.
	Tier() Tier
	// Alloc returns a new region of exactly size bytes (size > 0). When the
	// memory is exhausted the error wraps ErrOutOfMemory.
	Alloc(size int64) (Region, error)
	// Free returns a region obtained from Alloc.
	Free(r Region) error
	// Info reports free and total bytes of the underlying resource; ok is
	// false when the backend cannot tell.
	Info() (free, total int64, ok bool)
}
