// Package memory is strata's hybrid memory manager: it decides where every
// tensor's bytes live, hands them out fast, and accounts for each byte.
//
// # Overview
//
// Memory comes in four tiers (Tier), each provided by a Backend:
//
//	TierHost     plain host memory                the CPU device's only real tier
//	TierDevice   device memory (cuMemAlloc)       data touched every step
//	TierManaged  unified memory (cuMemAllocManaged, with cuMemAdvise and
//	             cuMemPrefetchAsync)              large, read-mostly data
//	TierStaging  mapped pinned host memory (cuMemHostAlloc DEVICEMAP)
//	                                              small, short-lived transfers
//
// Every allocation states its Role (parameter, gradient, embedding, ...).
// A Policy maps each role to a Placement: a tier plus, for managed memory,
// Advice flags. A Manager holds one caching Pool per tier that has a
// backend, routes each allocation through the policy to a pool, and keeps
// statistics per tier, per role and in total.
//
//	Manager.Alloc(size, role)
//	   └─ Policy.Place(role) ─ fallback ─> Pool of that tier
//	                                        └─ cached block, or a new segment from the Backend
//
// # Tiers and backends
//
// A Backend is a handful of methods (Name, Tier, Alloc, Free, Info) that
// return raw regions of exactly the size asked for. The host backend
// (NewHostBackend) maps anonymous private pages with mmap: the Go garbage
// collector never scans them, and a freed region goes back to the operating
// system at once, so the process's resident size tracks the pool's reserved
// bytes. Host memory can stand in for any tier: NewHostManager gives every
// tier its own host backend, so on the CPU the policy and the per-tier
// statistics are as real as on a GPU (a training run on the CPU reports how
// much would sit in device, managed and staging memory).
//
// The CUDA backends, in the cuda-facing packages, implement the same
// interface: device memory with a nil host view; managed memory whose
// Region.Host is the unified address; staging memory whose Addr is the
// device alias of the mapped pinned pages and Host the pages themselves.
// Each runs the one conformance suite, memtest.RunBackend. The advice of a
// managed allocation is carried on the Allocation (Allocation.Advice) and
// applied to its address range by whoever owns the CUDA stream, since the
// pool recycles blocks between roles.
//
// # Roles, policy and fallback
//
// HybridPolicy is the placement the design calls for: everything updated or
// rewritten each step (parameters, gradients, optimizer state, activations,
// workspaces) in pooled device memory; embedding tables in managed memory
// advised read-mostly, preferring and mapped by the device (pages migrate
// on demand and replicas serve reads); frozen weights likewise, and
// prefetched to the device once; transfer buffers in staging memory, which
// kernels read over the bus without a copy. SingleTierPolicy gives the
// baselines (all device, all managed, all zero-copy). SetPolicy changes the
// placement of later allocations, which is how a frequency-driven
// scheduler moves roles between tiers.
//
// A tier without a backend falls back: managed to device to host, staging
// to host, device to host. A role whose chain ends without a backend fails
// to allocate with ErrInvalidArgument naming the role and the tier. Advice
// is dropped when an allocation falls out of managed memory.
//
// # The pool
//
// Pool is a caching allocator over one backend, in the class of PyTorch's
// CUDACachingAllocator, whose constants it keeps so that the two can be
// compared on the same allocation traces:
//
//   - Requests are rounded up to MinBlockSize (512 B): every block is
//     aligned for any vector access, the waste is under 512 B a block, and
//     sizes fall into few distinct values, which makes reuse likely.
//
//   - Requests up to SmallSize (1 MiB) come from the small pool, whose
//     segments are SmallBuffer (2 MiB); larger ones from the large pool,
//     whose segments are LargeBuffer (20 MiB) for requests under
//     MinLargeAlloc (10 MiB) and the request rounded up to RoundLarge
//     (2 MiB) beyond. Keeping small blocks apart stops them from pinning
//     large segments; sharing segments among many small or medium requests
//     pays one backend call (cuMemAlloc costs 70-150 µs) for many
//     allocations.
//
//   - A request takes the best fitting free block: free blocks sit in two
//     B-trees (github.com/google/btree) ordered by (stream, size, address),
//     and the first block at or after (stream, rounded size, 0) is the
//     smallest that fits, the lowest-addressed among equals (which keeps
//     live data packed towards segment starts).
//
//   - The block is split only when the rest is worth keeping: any rest of
//     512 B or more in the small pool, a rest of more than 1 MiB in the
//     large pool (a smaller one would only serve requests the small pool
//     takes anyway), and never a block above PoolConfig.MaxSplitSize. With
//     a MaxSplitSize, requests below it never take blocks above it, and
//     requests above it take an oversize block only if it wastes less than
//     LargeBuffer: large cached blocks are reused whole, not carved up.
//
//   - On free, a block merges with free neighbours in its segment, so a
//     segment whose blocks are all free is a single free block again.
//
//   - Blocks are cached per Stream: a block freed on stream S is reused
//     only for stream S, so memory never passes to work that may run
//     before S is done with it. Segments belong to the stream that first
//     needed them.
//
//   - When a new segment cannot be had (the backend is out of memory, or
//     PoolConfig.Limit would be passed), the pool releases every fully free
//     segment and, if that freed anything, tries once more. The limit is
//     checked before the backend is called. EmptyCache releases the fully
//     free segments on demand; Close releases everything.
//
// The hot path allocates no Go memory: Block structs are recycled through a
// free list, and the tree search uses a key and a visitor built once. One
// warm Alloc+Free pair of 4 KiB costs about 60 ns on a 2-core EPYC, and
// about 230 ns on a mixed workload of 256 live blocks of log-uniform sizes
// from 512 B to 32 MiB (BenchmarkPoolPair); through the Manager, with role
// accounting and a new Allocation handle, about 90 ns (BenchmarkManagerPair).
//
// # Statistics
//
// Usage follows torch.cuda.memory_stats: Allocated (live blocks at their
// rounded sizes), Requested (what callers asked for), Reserved (segments
// held from the backend), Active (live blocks plus blocks freed but not yet
// reusable; equal to Allocated until cross-stream events exist),
// InactiveSplit (free bytes in segments that also hold live blocks: the
// fragmentation that EmptyCache cannot return), each with its current value
// and peak, and counters of calls, backend calls, OOMs and cache flushes.
// A manager's pools update the manager's total in the same critical section
// as their own, so the total's peaks are true peaks of the sum, not sums of
// per-tier peaks; per-role statistics add up to the total. Manager.Summary
// prints all of it as a table, with GMLake's fragmentation measure
// (1 - peak active / peak reserved) per tier. Pool.Segments returns a
// snapshot of every segment and block for diagnosis.
//
// # Errors and misuse
//
// Every failure is an error, never a crash: ErrInvalidArgument for sizes
// <= 0, unknown roles and tiers, and bad configurations; *OOMError, which
// wraps ErrOutOfMemory, when memory runs out; ErrDoubleFree for a second
// free or a foreign block; ErrClosed after Close; ErrLeaked from Close when
// blocks were still live (their memory is released anyway). OOMError
// carries what PyTorch's message does: requested bytes, the limit,
// allocated, reserved and reserved-but-unallocated bytes, and the device's
// free and total bytes.
//
// The pool recycles Block structs, so a Block freed twice is reported only
// while its struct is not yet reused; an Allocation is never recycled, so a
// second Allocation.Free is always reported. Block bytes are not zeroed on
// reuse. Using bytes after Free reads another allocation's data; after
// EmptyCache or Close it faults. Pool memory is invisible to the garbage
// collector: it must never hold Go pointers.
//
// # Concurrency
//
// A Pool is guarded by one mutex; a Manager's pools share the manager's, so
// its statistics are always consistent. Backends are called with that mutex
// held and need not be safe for concurrent use.
package memory
