// Package memory is strata's hybrid memory manager: it decides where every
// tensor's bytes live, hands them out fast, and accounts for each byte.
//
// # Overview
//
// Memory comes in five tiers (Tier), each provided by a Backend:
//
//	TierHost     plain host memory                the CPU device's only real tier
//	TierDevice   device memory (2 MiB pages mapped by the
//	             virtual memory API, or cuMemAlloc)
//	                                              data touched every step
//	TierManaged  unified memory (cuMemAllocManaged, with cuMemAdvise and
//	             cuMemPrefetchAsync)              large, read-mostly data
//	TierStaging  mapped pinned host memory (cuMemHostAlloc DEVICEMAP)
//	                                              small, short-lived transfers
//	TierOffload  mapped pinned host memory (or unified memory preferring
//	             the host, STRATA_OFFLOAD_MEMORY=managed)
//	                                              the cold tier: data touched a few
//	                                              times a step, and overflow
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
// return raw regions of exactly the size asked for; a VirtualMemory
// backend also maps pages into reserved address space, for expandable
// segments. The host backend
// (NewHostBackend) maps anonymous private pages with mmap: the Go garbage
// collector never scans them, and a freed region goes back to the operating
// system at once, so the process's resident size tracks the pool's reserved
// bytes. Host memory can stand in for any tier: NewHostManager gives every
// tier its own host backend, so on the CPU the policy and the per-tier
// statistics are as real as on a GPU (a training run on the CPU reports how
// much would sit in device, managed and staging memory).
//
// The CUDA backends (cuda_*.go, over package cuda's run-time driver
// binding, so a CGO_ENABLED=0 build has them everywhere) implement the
// same interface, and each runs the one conformance suite,
// memtest.RunBackend:
//
//   - NewDeviceBackend: cuMemAlloc and cuMemFree, no host view, and, unless
//     STRATA_EXPANDABLE_SEGMENTS=0, a VirtualMemory too (cuda_vmm.go:
//     cuMemAddressReserve, cuMemCreate, cuMemMap, cuMemSetAccess), over
//     which pools grow expandable segments. A request
//     beyond the device's whole memory is refused up front, by both (the
//     VirtualMemory's bound since session 40: before, an expandable
//     pool's such request stole every free page and created pages until
//     the device was full before it failed); the driver's
//     out of memory is wrapped so that errors.Is sees both ErrOutOfMemory
//     and cuda.ErrOutOfMemory. Info is cuMemGetInfo.
//   - NewManagedBackend: cuMemAllocManaged attached globally; under unified
//     addressing the device pointer is also the host pointer, so
//     Region.Host views the same bytes. Oversubscribed managed memory
//     thrashes and can hang the GPU, so a request larger than the device's
//     free memory less a headroom (ManagedHeadroom: max(512 MiB, 1/64 of
//     the device)) is refused with ErrOutOfMemory without asking the
//     driver, and so is one that would take the backend's live managed
//     bytes past the device's total less the headroom.
//   - NewStagingBackend: cuMemHostAlloc with DEVICEMAP and PORTABLE (and
//     WRITECOMBINED on request): Addr is the device alias
//     (cuMemHostGetDevicePointer, the host address under unified
//     addressing), Host the pinned pages, which kernels read and write over
//     the bus without a copy.
//
// Every CUDA backend keeps the set of regions it handed out, so a second
// free is ErrDoubleFree rather than a driver fault or the free of another
// allocation that reused the address. NewCUDAManager puts them together
// with a host backend for TierHost, under the hybrid policy by default; a
// device without managed memory or host mapping just lacks those tiers,
// which then fall back.
//
// # Managed-memory advice
//
// A backend that implements Adviser takes advice: after a pool over it
// takes a block for an allocation whose placement has Advice, it calls
// Advise on the block's bytes, before the block is handed out. The CUDA
// managed backend turns each flag into cuMemAdvise (read-mostly, preferred
// location device or host, accessed-by device or host) and
// AdvisePrefetchToDevice into cuMemPrefetchAsync on the allocation's
// stream. Manager.Prefetch migrates an allocation again once the host has
// filled it.
//
// Pool blocks are sub-ranges of segments and advice works on host pages:
// the driver rounds every range out to whole pages, so advice applies to
// every page the block touches, including pages it shares with neighbours.
// Under the hybrid policy embeddings and frozen weights share the managed
// pool and both prefer the device (frozen weights are read-mostly too), so
// a shared page gets nearly what both want. Blocks are recycled between roles, so
// each segment remembers the flags ever set on it, and an allocation
// clears the flags it does not want, but only on the pages wholly inside
// its block, so a neighbour never loses its advice. A segment that was
// never advised costs no call at all (the all-managed baseline makes none).
// Advice never changes results, only where pages live; a failed Advise
// fails the allocation, and the block goes back to the cache.
//
// # Cross-stream use
//
// Blocks are cached per stream, which is safe as long as a block is used
// only on the stream it was allocated for. When other streams use it too
// (a copy stream reading an activation, say), RecordStream tells the pool,
// as PyTorch's Tensor.record_stream does. When such a block is freed, the
// pool asks its StreamSync to record an event on each of those streams and
// keeps the block out of the free trees, pending, until all of them have
// completed; its bytes leave Allocated at once but stay in Active. Each
// Alloc first checks the pending events, oldest first, one query per
// stream (events of a stream complete in order, so the oldest unfinished
// one answers for the rest). Before reporting out of memory, in EmptyCache
// and in Close, the pool waits for them instead. A block whose event
// cannot be recorded is quarantined: never reused, released by Close.
//
// Streams are opaque numbers to the pool; the StreamSync says what they
// are. On the host there is none and the path costs one length check per
// Alloc. The CUDA one, CUDAStreams, maps a Stream (a CUstream handle,
// registered once with CUDAStreams.Stream) back to its *cuda.Stream and
// keeps a free list of cuEvents created with CU_EVENT_DISABLE_TIMING, so
// steady cross-stream traffic creates no events. memtest.StreamSync is a
// fake for tests.
//
// A private pool is a stream number that stands for no CUDA stream
// (CUDAStreams.Private): a captured CUDA graph allocates on one, so the
// blocks its capture freed are reused only by its own later work. While
// the StreamSync holds such a stream (StreamHolder; CUDAStreams.Hold),
// EmptyCache and the retry before an out-of-memory error leave its
// segments alone, since every replay of the graph writes them.
//
// # Roles, policy and fallback
//
// HybridPolicy is the placement the design calls for: everything updated or
// rewritten each step (parameters, gradients, optimizer state, activations,
// workspaces) in pooled device memory; embedding tables in managed memory
// preferring, mapped by and prefetched to the device (not read-mostly: a
// GPT's token table is trained every step, and writes to read-mostly pages
// collapse their replicas; on an H200 that made AdamW on GPT-2's table
// cost about 0.4 s a step); frozen weights likewise and read-mostly
// (replicas serve reads); transfer buffers in staging memory, which
// kernels read over the bus without a copy. SingleTierPolicy gives the
// baselines (all device, all managed, all zero-copy). SetPolicy changes the
// placement of later allocations, which is how a frequency-driven
// scheduler moves roles between tiers.
//
// A tier without a backend falls back: managed to device to host, staging
// to host, device to host, offload to staging to host. A role whose chain ends without a backend fails
// to allocate with ErrInvalidArgument naming the role and the tier. Advice
// is dropped when an allocation falls out of managed memory.
//
// # Budgets, spilling and the placement scheduler
//
// Placement by role alone saves little on a GPU: the roles it moves out of
// device memory (embeddings, staging buffers) are a few percent of a
// training step's peak. The hybrid placement goes further with three
// tools, all on the CPU's host backends in CI as on a GPU:
//
//   - A device budget: Config.Limits[TierDevice], or SetLimit at run time
//     (ParseBudget reads "4GiB", "50%", "0.5"), enforced by the pool before
//     the backend is asked; Stats.Limits and the summary show it. It
//     counts all device memory the manager holds: the device tier's
//     reserved bytes and the managed tier's, whose unified memory lives on
//     the device that uses it (the hybrid policy advises it to prefer the
//     device). Device allocations are refused while the two together
//     would pass it; managed ones are not (SetLimit), and the scheduler
//     demotes colder tensors to bring the total back under it.
//   - Spilling (spill.go): under a Policy with Spill (HybridPolicy), an
//     allocation the device tier cannot serve even after releasing its
//     cache and the managed tier's (which the device limit also counts)
//     goes to TierOffload instead of failing, as llm.c falls back to
//     managed memory; the first spill is reported once (OnSpill, else a
//     line on standard error) with the bytes and the cause, Stats.Spills
//     counts them all. The CUDA offload backend is mapped page-locked
//     host memory (NewPinnedOffloadBackend, the default since session 23)
//     or, with STRATA_OFFLOAD_MEMORY=managed, managed memory advised to
//     prefer the host and to be accessed by the device
//     (NewOffloadBackend); kernels read either over the bus without
//     faulting pages over, at one speed, but the copy engines reach
//     pinned memory at the bus's full speed both ways at once, which the
//     pipelined update's copy ring needs (Manager.HostPinned; tensor's
//     cuda_ring.go). It is bounded by host memory (DefaultOffloadShare of
//     what the process may use), not by the device's, where the managed
//     backend refuses to oversubscribe the device. Pinned memory is
//     page-locked: the pages the tier holds leave the host's pageable
//     memory, and releasing its cached segments (cuMemFreeHost, on
//     EmptyCache or an out-of-memory retry) waits for the device; on a
//     host short of memory, or with a workload that spills and frees
//     often, the managed backend may serve better. Without managed memory
//     the chain ends in staging memory; never in plain host memory on a GPU.
//   - Holds (Manager.Hold): device memory a caller allocates from the
//     driver itself (the copy ring's slots, which the copy engines must
//     reach and expandable segments' mapped ranges do not always let them)
//     counts against the tier's limit and in the scheduler's demand, so a
//     budget still covers all the device memory the process uses.
//   - A host budget (host_budget.go; its backend wrappers in host_budget_backend.go): the CPU device's tiers all draw on
//     one HostBudget, DefaultHostBudget's: EnvHostMemory
//     (STRATA_HOST_MEMORY: a size, a share such as "50%", or "off") or by
//     default DefaultHostShare of the memory the process may use (RAM or
//     its cgroup's limit, at most 9/10 of what is available at start). A
//     value below MinHostBudget (2 MiB) or malformed is refused with an
//     error, and the default budget is used. An allocation past the budget
//     fails with an *OOMError instead of the kernel killing the process.
//     Memory whose free failed may still be held: it stays charged, and
//     counts as lost (HostBudget.Lost), which the refusals name.
//   - The placement scheduler (scheduler.go): the tensor layer counts
//     every access to an allocation (Allocation.Touch, one atomic add per
//     operand of every op); a Scheduler tracks the long-lived roles
//     (parameters, gradients, optimizer state, embeddings, frozen
//     weights), turns the counts into accesses a step at each
//     Scheduler.Step, and keeps the step's device demand (its peak
//     allocated bytes plus what spilled, and the managed tier's reserved
//     bytes, which the budget covers) under the budget by demoting the
//     coldest tensors to the offload tier and promoting them back, hottest
//     first, once they have fitted for Patience steps (the margin and the
//     patience are the hysteresis). When the device tier refuses a
//     request that the budget had room for (its held bytes plus the
//     request under the limit: fragmentation), the scheduler's target
//     drops under what the device held then; a request past the limit is
//     the budget at work and leaves the target alone. After Retry steps
//     (16) without such a refusal the level is forgotten and the budget
//     aimed at again, each refusal after that doubling the wait: a first
//     step's refusals (gpt2-medium under 4 GiB: 150 MiB of the target)
//     and a layout that a placement trial cut no longer cost device memory
//     for good. Manager.Migrate moves an allocation
//     between tiers without changing its identity: a new block, a copy
//     ordered on its stream (cuMemcpyDtoDAsync on a GPU), the old block
//     freed to its pool; the tensor layer reads an allocation's address at
//     every op, so a migrated tensor is simply found at its new place.
//     Before the copy, a barrier (SetMigrateBarrier) may order the copy's
//     stream after other streams that write long-lived tensors (the
//     tensor layer's side stream); an allocation recorded on another
//     stream (RecordStream) is not moved, and the scheduler leaves it for
//     the step. Manager.MigrateOn queues the copy on another stream (a
//     copy engine's, while the allocation's stream computes: activation
//     offload, tensor.MoveTo) and records both blocks as used there, so
//     neither is handed out again under the copy; the caller orders the
//     streams with events, and Stats.AsyncMoves counts those moves apart
//     from Migrate's. A pool at its limit waits for blocks pending on
//     other streams' work the oldest first, until one fits
//     (Pool.waitFor), before it releases cached segments. NewScheduler
//     refuses a config with a negative, NaN or infinite setting, or with
//     ColdTouches above HotTouches (ErrInvalidArgument, naming them); a
//     scheduler's Step and Track fail with ErrClosed after its Close, the
//     manager's, or a later NewScheduler that replaced it. Each Step
//     returns a Plan (tensor, role, bytes, accesses a step, tier, why)
//     that prints as a table; Plan.Settled says whether
//     the placement has stopped moving (nothing moved, nothing waiting for
//     its patience) and Plan.OffloadTraffic what a step reads and writes
//     off the device (MigrateOn's moves of the step included: Plan.Moved),
//     which nn.Placement weighs against recomputation.
//
// examples/memstrategies compares the strategies (all device, all
// zero-copy, all managed, placement by role, the hybrid placement with and
// without checkpointing) on one model: peak device memory sampled with
// cuMemGetInfo after every allocation, tokens/s and the loss.
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
//   - A request takes the best fitting free block: the smallest that fits,
//     the lowest-addressed among equals (which keeps live data packed
//     towards segment starts), as if the free blocks sat in one ordered
//     set by (stream, size, address) like PyTorch's. They sit instead in
//     two segregated-fit indexes (free_index.go): per stream, size classes
//     (one per 512 B size up to 64 KiB, then 64 per power of two) with a
//     bitmap of the non-empty ones; a class keeps up to three blocks in
//     order in its slot and a small B-tree (free_tree.go) beyond. A
//     request searches its own class, else takes the smallest block of
//     the next non-empty class the bitmap shows: the same answer as one
//     big tree, from a few keys. The trees keep
//     the keys in their nodes and compare them without branches, and one
//     descent both finds the best fit and removes it.
//
//   - The fast path: each index keeps the block inserted last in a hot
//     slot, outside the classes, until the next insert moves it into its
//     class. A warm pair of one size splits a free block (the rest is
//     inserted: hot), and its free merges with that rest (deleted from the
//     slot) and inserts the merged block (hot), which the next allocation
//     takes: no class, bitmap or tree is touched. The hot block is one of
//     the index's blocks like any other: a take returns it only when it
//     fits and no class holds a smaller key in range (the classes are
//     searched below its key, skipped when the slot holds the only
//     block), a delete finds it, ascend (snapshots, EmptyCache, Close)
//     sees it, and it is merged with its neighbours like any free block.
//     So the pool hands out exactly the blocks it would without the slot:
//     no statistic, snapshot or trace replay changes. Where the next
//     insert keeps coming before the hot block is used (random sizes and
//     frees), the slot is emptied after two such evictions in a row and
//     skipped for the next 64 inserts.
//
//   - The block is split only when the rest is worth keeping: any rest of
//     512 B or more in the small pool, a rest of more than 1 MiB in the
//     large pool (a smaller one would only serve requests the small pool
//     takes anyway), and never for a request of PoolConfig.MaxSplitSize or
//     more (PyTorch's should_split tests the request, so a request just
//     under it whose new segment rounds past it is split). With
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
//     PoolConfig.Limit would be passed), the pool waits for blocks pending
//     on other streams' work and reuses one if it now fits; else (a
//     failed wait included, whose error the *OOMError then carries in its
//     Wait) it releases every fully free segment and, if that freed
//     anything, tries once more. The limit is checked before the backend is called.
//     EmptyCache releases the fully free segments on demand; Close
//     releases everything.
//
// # Expandable segments
//
// Classic segments fragment: a segment holding one live block cannot be
// given back, and its free bytes serve only requests that fit them (on
// PyTorch's allocation traces the classic pool, like PyTorch's own,
// reserves 11% and 34% more than the requested peak). A pool with
// PoolConfig.Expandable (pool_expand.go) instead grows one expandable
// segment per stream: a range of address space far larger than the
// memory, where pages (2 MiB, the GPU's granularity) are mapped where
// blocks need them. The backend must be a VirtualMemory: the CUDA device
// backend over the driver's virtual memory API (cuMemAddressReserve,
// cuMemCreate, cuMemMap, cuMemSetAccess, cuMemUnmap, cuMemRelease;
// cuda_vmm.go), and the host backend over mmap and mprotect (host_vm.go),
// so that CI runs the same code. Small and large requests share the
// segment: a small block pins a page, not a segment.
//
// Blocks tile the whole range; where no memory is mapped they are holes,
// never in the free index, so allocation from the cache, splitting and
// coalescing are the classic pool's (rests of any size are split off).
// When no free block fits, the request goes to the run of free blocks and
// holes that needs the fewest new pages, the shortest such run among
// equals (the end of the range is always one; there, in the first period
// of a pool with step plans, a request of 16 whole pages or more that may
// live long, any role but activations, gradients and staging, starts at a
// page boundary when that needs no more new pages, so that it touches only
// its own pages: PyTorch's cuBLAS workspaces, allocated among a first
// step's activations and kept, left partly used pages at every later
// peak; sessions 45-46, shortLived in pool_expand.go); the pages come from whole
// pages inside other free blocks first (stolen: GMLake's stitching of
// scattered free memory into one contiguous block), created only when
// none is left. Pages stolen from segments of the same stream are lent,
// not unmapped: mapped at their new place while still mapped at the old
// one, which becomes a stale range that nothing allocates from. Work
// queued on the stream before the old block was freed runs before any
// work on the new one, as with any reuse of a cached block, so lending
// needs no synchronisation; stale ranges are unmapped together, after one
// device synchronisation, once they outgrow the mapped memory, and in
// EmptyCache and Close. Pages of other streams' segments are unmapped
// after a synchronisation. A request whose pages cannot all be had keeps
// nothing: one that the limit (or the host budget) has no room for, even
// with every free page taken, is refused before a page moves, and one that
// runs out on the way gives back the pages it created, so a failed
// allocation leaves the bytes reserved where they were. Physical memory
// thus grows only when the whole pages the pool holds are all in use:
// reserved exceeds allocated by the partial pages at the edges of free
// runs. On PyTorch's traces
// (examples/bench-alloc) the peak reserved is 1.003 and 1.015 times the
// requested peak (classic: 1.112 and 1.343; PyTorch's expandable
// segments in live runs 1.030 and 1.179), with 3 synchronisations in 3
// training steps. Eager steps that lay themselves out a little
// differently each time (gpt2 fp16 with checkpointing: 556 pages moved a
// step on the H200) or a workload that never repeats would keep moving
// pages, each a mapping and an unmapping on a GPU; a pool that keeps
// stealing earns slack to create pages instead, up to 3/16 of its peak
// allocated bytes above it (pool_expand_churn.go): those gpt2 steps stop
// moving pages within 100 steps at 1.094x reserved (classic segments:
// 1.133x). Requests up to 4 KiB (tinySize) go first to free blocks in
// pages that already hold live tiny blocks (pool_expand_tiny.go):
// the fp16 model's hundreds of long-lived blocks of 512 B to 2.5 KiB,
// allocated once among short-lived ones, then share a few pages instead of
// each pinning an otherwise free one. The same patterns scaled to other
// model sizes (bench-alloc -scale; 13 scales from 0.25 to 4,
// bench/results/cpu-expandable-scaled-2026-12-02.md, before that rule)
// stay within 1.0082 for fp32, but for fp16 with checkpointing reach 1.048
// to 1.093 at 6 of the 13 (0.25 to 0.43, 0.62 and 0.75; before the tiny
// rule 1.026 to 1.104 at 8; 30 of 40 scales from 0.2 to 4 in
// TestExpandableScaleSweep's finer sweep, mean 1.0561, max 1.1474,
// bench/results/cpu-stitch-bound-2026-12-05-s29.md; 34 before), against
// the goal of 1.02. What remains is free bytes in pages that hold live
// ones, at the peak: pages holding only blocks under 1 MiB (before the
// tiny rule 5.4 pages' worth of 89.7 requested at scale 0.25, 6.6 of
// 132.7 at 0.37, 1 to 3 of them pinned by blocks of 4 KiB or less alone)
// and the partial edge pages of large blocks whose neighbours died (3.9
// pages at 0.25, 5.6 at 0.37, 11.7 of 394.7 at 1.1); rounding is under 0.001 and no whole page
// is ever free at the peak. On the 40 scales (before the tiny rule),
// taking either part away alone would bring only 12 (the small blocks'
// pages) or 21 (the large blocks' edges) of them under 1.02. Nothing else
// tried was kept: sharing a physical page between two places by disjoint
// byte ranges (tried twice on 2026-12-02: a block's edge pages
// taken from other pages' free edges, then a new block's first page taken
// from another page's free tail part, with the part given back when
// either side is all free; the patch is kept in the results file's
// folder), a range and index of their own for requests under 1 MiB (or
// up to 4 KiB, 16 KiB, 64 KiB, 256 KiB), stealing pages from the start of
// a range, and other placement rules (2026-12-03: address-ordered first
// fit, placing next to the oldest live neighbour, carving cached blocks at
// the end that spans fewer pages, touching the fewest pages with no live
// bytes: each better at some scales, worse at others). A model of ideal
// page sharing (any free head and tail parts of any pages joined into one
// block, greedy placement) still reaches 1.026 to 1.061 below scale 1
// (same file). Yet the page size is not the limit: every replay of the 12
// traces of bench/traces at the 40 scales fits within 1.02 in whole
// pages (the peak allocated bytes rounded up to pages; the worst 1.0165),
// so the excess is placement, free bytes in pages that also hold live
// ones at the peak; sub-page stitching of the present layout (partial
// pages whose live bytes lie at disjoint offsets sharing one physical
// page, a bound that is not built) would take the mean from 1.0238 to
// 1.0128 and the replays above 1.02 from 163 to 90 of 480
// (bench/results/cpu-stitch-bound-2026-12-05-s29.md). EmptyCache unmaps
// and releases every whole free page and the address space of empty
// segments.
//
// Step plans (PoolConfig.PlanSteps; by default since session 37 a CUDA
// manager's device tier, unless STRATA_PLAN_STEPS=0, and a host
// manager's with STRATA_PLAN_STEPS=1; any pools with Config.PlanSteps;
// pool_expand_plan.go, plan_layout.go) bring knowledge of lifetimes to
// the placement: the pool records its allocations and when each was
// freed, finds the training step repeating (a window of 32 allocations
// seen again at least 256 allocations later), lays out the next step's
// blocks with their lifetimes around the blocks live now (offline dynamic
// storage allocation: the blocks live at the peak first, then by size, each where
// its edge pages are most shared over its life; in another greedy order
// too, longest lives first, when that layout needs more pages at its peak
// than are mapped, the fewer kept), and places each
// allocation that matches the plan there, falling back to the usual
// placement after a few requests it did not expect or at the first place
// it finds taken; while no plan runs, requests up to SmallSize go right
// after the highest live block, so that small blocks allocated together
// (the optimizer state of the first step) share pages, and so do larger
// ones of the sizes a setup allocated before the pool's first free (16
// or more allocations: a model's parameters; the first step's gradients
// and moments have their sizes), less the sizes freed since (session 40:
// the 24 traces at scale 1 from 4 above 1.02 to 3, mean 1.0116 to
// 1.0087; 40 scales of the 12 from 83 above to 58). A plan that
// follows one run to its end is declined when its layout needs more
// pages at its peak than the segment has mapped: the next period is
// placed as usual, and the repetition after it plans again. On the 40 scales
// it takes the fp16 trace with checkpointing from a mean of 1.056 (max
// 1.147, 30 above 1.02) to 1.010 (max 1.031, 3 above: 0.2, 0.27, 0.32),
// and on 60 other scales from 1.053 (max 1.147, 47) to 1.010 (max 1.030,
// 3); fp32 from 1.0047 (max 1.018) to 1.0038 (max 1.016), 60 scales
// 1.0050 (max 1.024, 1 above) to 1.0035 (max 1.014, none) (session 18).
// Over all 12 traces at the 40 scales (2026-12-06, 480 replays): no plans
// mean 1.0238, max 1.147, 163 above 1.02; the plans of session 18 1.0136,
// 1.143, 99; with the lives that end as a period ends counted (laid out
// as living for ever before), the second order and the decision 1.0122,
// 1.086, 83 (on 60 other scales 1.0231, 1.156, 246; 1.0133, 1.106, 129;
// 1.0119, 1.081, 115), and at scale 1 every trace within 1.02 (the worst
// trace-mid-fp16-ckpt, 1.0184), where the plans of session 18 left
// trace-char-bf16-ckpt at 1.0221 and trace-mid-fp16-ckpt at 1.0201 and
// no plans leave trace-char-b32-fp16-ckpt-plain at 1.0399 (more in
// pool_expand_plan.go). Two fp32 traces are still a little better
// without plans (gpt2-b4, mid). It costs about 2 us a call on the
// replays (layouts of a few milliseconds; 0.12 to 0.2 without; on a
// loaded 2-core host on 2026-12-06 0.7 us without, 6.4 with the plans of
// session 18 and 12.5 with the second order's layouts) and device
// synchronisations (pages lent away from places the plan needs are
// swept: dozens a replay instead of 5), so it was off by default. In live
// eager training on the H100 (bench/results/gpu-s36.md, call 3) it lost: gpt2
// fp16 with checkpointing reserved 1.125 of its allocated peak against
// 1.095 unplanned and ran 4% slower, mapping 58 pages and synchronising 3
// times a step where the unplanned pool had settled. The plans reused one
// cached layout every step, but a layout made for the fewest pages at
// each moment touches more pages over the whole step (its footprint:
// 1,784 to 2,171 for peaks of 1,612 to 1,715, with 1,635 mapped) than the
// pool holds, so each step lent pages away from places the layout needed
// again, swept them and mapped them back (on the recorded steps replayed:
// 867 pages and 36 synchronisations a step, then, once the churn slack
// let growth create pages, 2.7 pages and 1.7 synchronisations a step for
// ever, at 1.125). Now plans settle (pool_expand_plan.go): after 3
// plans in a row that ran to their end, layouts keep their footprint
// low (layoutWith's compact mode: 1,622 to 1,627 pages for the same step), and the
// pages a settled plan places blocks on are not taken for growth while
// it runs (pages are created instead, once), so the same layout runs in
// the same pages every step; a settled planner whose plans keep mapping
// pages 8 periods in a row stops for good. Replaying the recorded eager
// steps (TestPlanStepsEagerStepsSettle), no page is mapped and no device
// synchronised from the first repeated step on, at 1.0079 peak reserved
// per allocated byte for gpt2 fp16 with checkpointing (no plans 1.0935
// once settled), 1.0092 for the char model (1.0920) and 1.0031 for
// gpt2 fp32 (1.0160); the 4-step traces never settle and are unchanged.
// These are the figures before session 46: the recordings carry no
// roles, so the page boundary for long-lived whole pages takes their
// first step's whole-page activations too, and they replay at 1.0110,
// 1.0204 and 1.0015.
// Live on the H100 (bench/results/gpu-s36.md, call 5; train-gpt -bench,
// 60 warm-up steps, 30 timed, eager): gpt2 fp16 with checkpointing 1.0108
// against 1.0949 unplanned at the same speed (115,906 and 113,651
// tokens/s against 115,795 and 115,305), gpt2 fp32 1.0035 against 1.0329
// (51,877 against 51,989), char bf16 1.0026 against 1.0036, gpt2 bf16
// captured in a CUDA graph 1.0123 against 1.0108 (its steps allocate
// from the graph's pool); no page mapped and no synchronisation a step in
// any; with plans on by default (session 37, bench/results/gpu-s37.md)
// the same: 1.0108 against 1.0949, 1.0035 against 1.0329, at the same
// speed. Those live gpt2 and char runs, recorded from their first
// allocation on the H100 (session 42, testdata/live-*), replay in
// TestPlanStepsLiveRecordings: a placement change is checked against
// them on the CPU before the live gate (session 41's first-plan rule,
// dropOneOffs, lost there as it did live, until a settled planner's
// plans were judged by their footprint only; then 1,635 pages replayed
// against 1,634, and live 1.0114 against 1.0108, one page, for the
// held-out traces' gains: bench/results/gpu-s43.md). A layout's cost grows as the square of the period's allocations,
// and goroutines allocating from one manager at once once made layouts
// that held it for minutes; the layouts' work is now bounded (a burst,
// then a credit per allocation), periods above 16,384 allocations are not
// planned, and a run with no repetition for 32,768 allocations gets the
// usual placement, its planner asleep (no live blocks by address, no
// frees recorded) until a repetition wakes it (pool_expand_plan.go,
// "Bounds"). On one H100 host (session 39) plans cost the CUDA manager's
// alloc/free pair 37-65 ns on random sizes (162-201 before the planner
// slept), 0-15 on 4 KiB and 1 MiB and 75-83 on 64 MiB (59 on another
// host once a planned placement searched the live blocks once instead of
// three times; the pool rows of bench-alloc plan nothing). Even
// a layout that knows every lifetime of the whole trace in advance
// (greedy by size, the pages touched by live blocks counted at every
// moment) reaches 1.028 to 1.033 at 3 of the 40 fp16 scales (mean
// 1.0096), so 1.02 everywhere needs better than greedy layout as well
// (bench/results/cpu-expandable-scaled-2026-12-03-s18.md).
//
// Managers use expandable segments for every pool whose backend is a
// VirtualMemory (Config.Segments; SegmentsDefault reads the environment
// variable STRATA_EXPANDABLE_SEGMENTS, and is expandable when it is
// unset): memory is what a GPU runs out of, and the steady state of a
// training loop allocates from the cache like the classic pool, at the
// same cost per call. On the GPU too, since session 24 (opt-in before):
// the device backend is a VirtualMemory unless STRATA_EXPANDABLE_SEGMENTS=0
// (it probes the API with one page and falls back to cuMemAlloc segments
// when the device or driver lacks it). A CUDA graph's private pool grows
// its own range during the capture without synchronising (a held
// stream's growth takes pages from its own free blocks or creates them,
// pool_expand_pages.go): with the eager cache given back before the
// capture (tensor.CaptureGraph), train-gpt on the H200 reserved 1.006 to
// 1.044 of its allocated peak on seven configs where classic segments
// reserved 1.041 to 1.310 and PyTorch, at its best setting, 1.030 to
// 1.196 (bench/results/hybrid-2026-12-04-s24.md). On the H200 (driver 580) the copy
// engine refuses, now and then, copies into and out of the mapped ranges
// (cuMemcpyHtoDAsync of pageable memory, cuMemcpyDtoHAsync into it,
// cuMemcpyDtoDAsync between ranges: CUDA_ERROR_INVALID_VALUE, a few MiB
// and up, not reproducible call by call), while kernels, memsets,
// and synchronous copies on them never failed; asynchronous copies of
// pinned memory passed cuda's TestGPUVMMCopies but failed in training
// (session 21). Package tensor therefore keeps the copy engines out of
// expandable device memory: uploads staged in mapped pinned memory and
// copied by kernel, downloads synchronous after the stream, device copies
// by kernel, and moves between tiers by kernel too (tensor installs its
// copy with Manager.SetCopy); otherwise the CUDA manager moves between the device tier and
// page-locked host memory (the staging tier, and the offload tier over
// pinned memory) with cuMemcpyHtoDAsync and cuMemcpyDtoHAsync by the host
// pointer (Manager.copyBetween; TestGPUMigrateHostTiersRoundTrip). Session 20 found training on
// expandable device memory wrong without any move (the first step's loss
// differed from classic segments and from run to run): tensor's uploads
// there were synchronous copies on the legacy stream, unordered with its
// non-blocking streams. Since session 21 tensor stages them and copies by
// kernel on the stream, and training on expandable memory gives the
// losses of classic segments bit for bit on the H200. The host
// (where CI tests them) uses expandable ones; on Linux its pages have an
// identity (host_vm_file_linux.go: a page of a memory file, so a page
// mapped at two places is one memory, as on a GPU).
//
// Diagnostics, off by default: EnvPoison (host pools fill freed blocks
// with 0xFF), EnvMemoryCheck (expandable pools check their pages after
// each allocation: pool_check.go), EnvExpandableLend=0 (steal unmaps
// instead of lending), EnvExpandableSteal=0 (growth creates every page),
// EnvExpandableSync (the device backend synchronises before each map and
// unmap).
// Pools made directly with NewPool are classic unless asked.
//
// The hot path allocates no Go memory: Block structs and tree nodes are
// recycled through free lists. On the 2-core EPYC (2026-12-02, minimum
// over windows of 5000 pairs, TestPairWindows; the figures in
// bench/results/cpu-pool-pair-2026-12-02-b.md) one warm Alloc+Free pair
// costs about 32 ns at 4 KiB and 1 MiB, 23 ns at 64 MiB, and 90-94 ns on
// a mixed workload of 256 live blocks of log-uniform sizes from 512 B to
// 32 MiB, one random block replaced per pair (167 ns with one B-tree per
// pool and 112-byte blocks; about 83 ns in a quieter session of
// 2026-12-01, 100 ns in this one before the changes below); through the
// Manager, with role accounting and a new Allocation handle (cut from a
// slab of 64), about 63 ns at 4 KiB in a quiet session
// (BenchmarkManagerPair). examples/bench-alloc measures the same pairs on
// the GPU against the driver's allocators.
//
// What the mixed pair is made of (cachegrind, per pair): about 850
// instructions, 130 branches of which some 6 mispredicted in its model,
// and 4 first-level data misses; the index's work is about 1.6 inserts,
// 0.6 merges and one take that mostly falls to the next class, the same
// for any structure that keeps exact best fit with immediate coalescing.
// Taken apart (TestPairWindows' flags): with 8 live blocks below 64 KiB,
// all in L1, it costs about 70 ns, and 45 when the sequence repeats every
// 16 pairs so that its branches are predictable, against 32 for the
// fixed-size pair: about a quarter of the mixed pair is mispredictions
// and a quarter cache misses, the rest instructions. Hence the code on
// the pair's path avoids branches on the size: sizeClass computes the
// class with one bit length and shifts, a segment points at its free
// index, takeFree picks the small or large index by indexing
// Pool.indexes, shouldSplit picks its minimum rest by a conditional move
// (these took the mixed pair from about 100 to 94 ns and cachegrind's
// mispredictions from 8.7 to 6.5 a pair); class trees are held by value,
// and the statistics are updated inline (90 ns; 5.9 mispredictions, 852
// instructions, from 911). The class trees' loops, whose exits depend on
// a node's key count, were then about 2 mispredictions a pair, half of
// their operations on trees of one or two keys; a class now keeps up to
// three blocks in order in its slot (compares written out) and builds a
// tree from the fourth, returning to the slot when a removal leaves three
// (805 instructions, 4.75 mispredictions, 3.2 L1 data misses from 4.2;
// about 84 ns from 90; on the H200's host 130 and 145 ns against 212 and
// 249 for the code before these changes, bench/results/
// gpu-s12-call6-ba-bench-alloc*.md). Pool.alloc, free, split and
// insertFree then got the common cases of takeFree, the index's take,
// reclaim and the index's insert and delete written out, four to five
// calls a pair fewer (750 instructions, 4.9 mispredictions; about 80 ns
// from 84 on the EPYC, fixed sizes ~0.5 ns faster). Then the random
// sizes' branches were turned into data (2026-12-02, session 13;
// bench/results/cpu-pool-pair-2026-12-02-s13.md): an insert places a
// block among its class's zero to two inline blocks by conditional moves
// (an absent block stands in as blockMax, its pointer picked from a pair
// by index: the compiler keeps a branch for a pointer that is then
// loaded through), a delete finds it among them the same way, a removal
// clears the class's and the summary's bits without a test, free reads
// the neighbours' states (a missing one is the pool's none block) before
// the statistics' work, absorb and split point a neighbour back by a
// conditional move (the compiler moves a pointer conditionally for a
// store's address, not for a load's), a leaf insert and removeLeaf shift
// as they search (one loop exit where a search and a shift had two), and
// insertClass's rare cases are calls that end it, so that its common
// case spills nothing: 838 instructions but 2.7 mispredictions a pair
// (from 750 and 4.9); on that session's 2-core host the mixed pair went
// from 74 to 63 ns, the fixed sizes from 35.6 to 36.7 ns (4 KiB, 1 MiB)
// and 29.9 to 30.6 (64 MiB). What is left is spread thin: Go's per-call
// cost (prologues, bounds and write-barrier checks) in every small function,
// the merge's tests of the neighbours and the take's of its own class
// (random on the mixed pair, with different work on either side), and
// the trees' loops. Branch-free tree search and
// shifts over the first keys cost more instructions than they saved,
// and one bit scan for the take's own and next class made it slower;
// profile-guided optimisation (go build -pgo) gave another ~7% on the
// mixed pair and ~15% on fixed sizes but helps only binaries built with
// a profile.
//
// Two attempts at a faster pair were measured and dropped (2026-12-01): a
// cache of recently freed blocks by exact size in front of the index,
// coalesced before the pool grows, made fixed-size pairs skip the index
// but handed out blocks best fit would not have (the best-fit tests
// failed) and raised the fp16 trace's reserved/requested with expandable
// segments from 1.015 to 1.029; and 24-byte size classes holding the lone
// block's size (no block load to reject a class) were no faster (mixed
// pair, minimum over 400 windows of 5000: 90 ns before, 94 after).
//
// The hot slot (2026-12-02; bench/results/cpu-pool-pair-2026-12-02.md)
// keeps best fit exact, where the exact-size cache did not, since the
// slot holds merged blocks and is searched with the classes. It took the
// fixed sizes from 41 to 31 ns (4 KiB), 42 to 31 (1 MiB) and 27 to 23
// (64 MiB) and left the mixed pair where it was within the noise (its
// bypass included): the mixed pair's index work is not something a slot
// can skip. Lone blocks in an 8-byte-a-class slice (trees apart), takeMin
// for later classes and the segment's hot fields in one cache line were
// neutral there. Every change to the pair is checked against
// TestTraceHashes (examples/bench-alloc), which hashes every decision of
// 63 trace and random replays; its list is
// bench/results/cpu-pool-pair-2026-12-02-b-trace-hashes.txt.
//
// # Statistics
//
// Usage follows torch.cuda.memory_stats: Allocated (live blocks at their
// rounded sizes), Requested (what callers asked for), Reserved (segments
// held from the backend), Active (live blocks plus blocks freed but still
// waiting for other streams' work; equal to Allocated without cross-stream
// use), InactiveSplit (free bytes in segments that also hold live or
// pending blocks: the fragmentation that EmptyCache cannot return), each
// with its current value and peak, and counters of calls, backend calls,
// OOMs and cache flushes. The allocation path keeps only Allocated,
// Requested and the counters: Active and InactiveSplit are derived on
// reading from Allocated, the bytes pending and the bytes mapped in
// segments in use, which change off that path (liveUsage, stats.go), with
// their peaks kept as the others' are.
// A manager's pools update the manager's total in the same critical section
// as their own, so the total's peaks are true peaks of the sum, not sums of
// per-tier peaks; per-role statistics add up to the total. Manager.Summary
// prints all of it as a table, with GMLake's fragmentation measure
// (1 - peak active / peak reserved) per tier. Pool.Segments returns a
// snapshot of every segment and block for diagnosis.
//
// # Allocation history and snapshots
//
// Manager.RecordHistory turns on a recorder (history.go), like PyTorch's
// torch.cuda.memory._record_memory_history: every alloc and free (time,
// requested and rounded size, address, tier, role, stream, and the op
// that asked, which callers pass with AllocOp), every reservation and
// release of backend memory, and MarkHistory's labels go into a ring of a
// fixed number of events (DefaultHistoryCapacity, about 13 MiB when full).
// The ring grows lazily, by doubling as events come, up to its capacity,
// not all at once; a larger capacity is clamped to MaxHistoryCapacity and
// to what fits in an eighth of the host's memory, and History.Capacity
// reports the size used. Once it is full the oldest events make room, and
// what they did to each tier's bytes per role is folded into the
// History's Before state, so the bytes can always be followed from the
// oldest event kept. Off, the hot path pays one nil test per Alloc and per
// Free; on, a clock read and a write of about 100 bytes per event:
// BenchmarkManagerPairHistory costs 75-90 ns a pair more than
// BenchmarkManagerPair on the 2-core EPYC once the ring is full
// (bench/results/cpu-history-cost-2026-12-05-s29.md). A block keeps
// its allocation's event number mod 2^32-1, plus one (0: allocated while
// nothing recorded), in a spare word of its cache line, so a free names
// its allocation (and its op) without a map. Manager.History copies the
// ring newest first, holding the lock for 4096 events at a time, not for
// the whole ring (up to 1.8 GB), so allocations go on meanwhile; events
// they overwrite before they were copied leave the copy from its front.
// Pool.History of a manager's pool is that pool's part: its tier's events
// and the marks, with its tier's Before state and dropped events.
//
// Manager.Snapshot gives every segment and block of every tier with the
// live blocks' roles, their labels (Allocation.SetLabel, in
// BlockInfo.Label) and, while the history holds them, their ops: what
// torch.cuda.memory._snapshot() gives, as JSON. Package memviz turns
// histories into Chrome traces for Perfetto and PNG timelines, and
// snapshots into PNG segment maps; it rebuilds the snapshot of any moment
// of a history from a snapshot taken when the recording began.
//
// # Errors and misuse
//
// Every failure is an error, never a crash: ErrInvalidArgument for sizes
// <= 0, unknown roles and tiers, and bad configurations; *OOMError, which
// wraps ErrOutOfMemory, when memory runs out; ErrDoubleFree for a second
// free or a foreign block; ErrClosed after Close; ErrLeaked from Close when
// blocks were still live (their memory is released anyway; the message
// counts them per role and names the labelled ones' labels, up to 8 a
// role). OOMError carries what PyTorch's message does: requested bytes,
// the limit, allocated, reserved and reserved-but-unallocated bytes, and
// the device's free and total bytes or, for host memory, the HostBudget
// that applies and what is left of it. The methods of a nil *Allocation
// are safe: they return zero values (Free, ErrDoubleFree), and Touch and
// SetLabel do nothing.
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
// its statistics are always consistent. Backends, their Advise and the
// StreamSync are called with that mutex held; backends need not be safe
// for concurrent use (the CUDA ones are), a StreamSync shared by several
// managers must be. The mutex is the package's own (mutex.go): its
// uncontended Lock and Unlock cost one atomic instruction between them
// (sync.Mutex's two), which a pool call pays twice; contended waiters spin
// briefly, then queue and sleep, and one that waited a millisecond is
// handed the lock.
//
// # What is verified where
//
// Everywhere (CI, no GPU): the pool's algorithm in detail over address
// ranges and host memory, FuzzPool's random sequences (with and without
// cross-stream use) checking every invariant after every step, the
// record-stream protocol against memtest.StreamSync (deferred reuse, one
// query per stream, waits before OOM, in EmptyCache and Close, quarantine
// when recording fails, Active = Allocated + pending), advice application
// and clearing through a recording Adviser, the managed headroom rule, and
// the conformance suite on the host backends; expandable segments'
// invariants (blocks tile each range, holes and stale ranges page-aligned,
// every page in use at one place, reserved = pages mapped) after every
// call of random workloads, with limits and two streams, and of PyTorch's
// traces (also at 16 scales from 0.2 to 4, with reserved/requested
// bounded: 1.02 where the pool reaches it, today's figure elsewhere), and
// of random workloads whose virtual memory fails a tenth of its calls of
// each kind, and the virtual memory conformance suite on the host. The CUDA tests
// (cuda_*_test.go, TestGPU*) skip with the reason where no GPU is usable;
// on one they run the conformance suite on the device, managed, staging
// and write-combined staging backends; the pool over device memory (split,
// coalesce and reuse with the data checked on the GPU, OOM under a limit
// with cuMemGetInfo in the error, EmptyCache giving memory back to the
// driver as cuMemGetInfo sees it, FuzzPool's inputs over device memory);
// managed memory written by the host, advised with every flag, prefetched,
// read by the GPU and written back; the headroom refusal made without
// asking the driver; staging memory read and written through its device
// alias; record-stream with a stream held busy by a kernel that spins on a
// mapped flag (the block is not reused until the stream's work is done,
// and that work's late writes land in memory no one else was given), and
// EmptyCache waiting for such a stream; the CUDA manager placing every
// role; the virtual memory suite on the device (a page mapped at two
// addresses shows the same bytes), the random workloads over device pages
// with the data checked on the GPU, EmptyCache giving pages back as
// cuMemGetInfo sees it, the traces within 1.02, and the CUDA manager's
// device pool expandable by default and classic when
// STRATA_EXPANDABLE_SEGMENTS=0 says so. examples/bench-alloc times the pool
// against cuMemAlloc and cuMemAllocAsync, and replays PyTorch allocation
// traces with classic and expandable segments.
package memory
