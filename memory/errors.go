package memory

import "errors"

// Sentinel errors, for errors.Is.
var (
	// ErrOutOfMemory: a tier could not provide the requested bytes, even
	// after its cached blocks were released. The concrete error is *OOMError.
	ErrOutOfMemory = errors.New("out of memory")
	// ErrInvalidArgument: a size, role, tier or option that makes no sense.
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrDoubleFree: a block or allocation was freed twice, or was never ours.
	ErrDoubleFree = errors.New("double free or foreign block")
	// ErrClosed: the pool or manager was used after Close.
	ErrClosed = errors.New("memory manager closed")
	// ErrLeaked: a pool or manager was closed while blocks were still live;
	// their memory was released anyway and the error says how much.
	ErrLeaked = errors.New("memory leaked")
)
