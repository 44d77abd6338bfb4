package memory

import (
	"fmt"
	"math"
	"math/bits"
)

// Pool is a caching allocator over one Backend, in the class of PyTorch's
// CUDACachingAllocator; doc.go walks through the algorithm. It is safe for
// concurrent use: one mutex guards it (a Manager's pools share the
// manager's), whose uncontended Lock and Unlock cost one atomic
// instruction between them (mutex.go).
type Pool struct {
	mu      *mutex
	backend Backend
	name    string
	tier    Tier
	cfg     PoolConfig

	small, large freeIndex // free blocks by (stream, size, address)
	// indexes is the index of requests up to SmallSize and of larger
	// ones: small and large, or large twice in a unified pool.
	indexes [2]*freeIndex
	segs    *segment // all segments, a doubly linked list
	nsegs   int

	sinks  usageSinks
	spare  *Block // recycled Block structs, linked through next
	closed bool

	// Cross-stream use (pool_events.go): pending holds the events of freed
	// blocks that were used on other streams, oldest first; blocked is
	// scratch space for processEvents.
	sync    StreamSync
	pending []pendingEvent
	blocked []Stream

	// poison: fill freed blocks with 0xFF (EnvPoison, host backends).
	poison bool
	// adviser is the backend when it takes managed-memory advice
	// (advise.go), else nil.
	adviser Adviser

	// hist records the allocation history while it is on (history.go);
	// nil when off, which is all the hot path tests.
	hist *recorder
	// recorded is the recording History reads: hist while on, else the
	// last one a manager's StopHistory ended (history_pool.go).
	recorded *recorder

	// vm is the backend of an expandable pool (pool_expand.go), else nil;
	// page is its granularity, 1<<pageShift (the tiny blocks' page
	// indexes on the hot path shift instead of dividing).
	vm        VirtualMemory
	page      int64
	pageShift uint
	// staleBytes is address space of expandable segments still mapped to
	// pages lent elsewhere (pool_expand.go).
	staleBytes int64
	// largeRest is the smallest rest of a large block worth splitting off:
	// above SmallSize in a classic pool, any in an expandable one.
	largeRest int64
	// unified: small requests share the large pool's segments and index
	// (expandable pools, where a small block pins a page, not a segment).
	unified bool
	// tinyMax is the largest request an expandable pool places among the
	// tiny blocks (pool_expand_tiny.go); 0 in a classic pool, where the
	// test on it is all the hot path pays.
	tinyMax int64
	// tinyLive is the live tiny blocks counted in expandable segments'
	// pages: with none, a tiny request takes the best fit at once.
	tinyLive int64
	// placeMax is the largest request an expandable pool places itself
	// (allocPlaced: tiny ones, and all of them when it plans its steps,
	// pool_expand_plan.go), not by the index's best fit; 0 in a classic
	// pool, where the test on it is all the hot path pays.
	placeMax int64
	// spanDue: pages were mapped into a segment in use during this
	// allocation (freeMapped, only ever called inside alloc), moving the
	// spanned bytes without looking at InactiveSplit's peak, since the
	// block may take them; alloc looks at it before it returns
	// (settleSpanned).
	spanDue bool
	// shared, when set, is the bytes held elsewhere against this pool's
	// Limit: a manager's device budget also covers its managed tier,
	// whose pages live on the device (Manager.SetLimit).
	shared func() int64
	// releaseShared, set with shared, releases the cache of the pools
	// whose bytes shared counts (their fully free segments and free
	// pages; with wait, after waiting for their blocks pending on other
	// streams, as EmptyCache does) and returns the bytes released: room
	// under this pool's Limit that costs no live memory.
	releaseShared func(wait bool) (int64, error)
	// releasePeers, set by a manager whose pools' backends charge one
	// HostBudget (the CPU device's tiers), releases the cache of the other
	// pools charging it and returns the bytes released: room in the budget
	// that costs no live memory, taken before an allocation the budget
	// refuses fails.
	releasePeers func() (int64, error)
	// external is what callers hold against the pool's limit outside it
	// (Manager.Hold): counted in held and demand like shared bytes.
	external int64
	// labelOf, in a manager's pool, is the label of a live block's
	// allocation (Manager.labelOf), for snapshots; nil in a pool of its
	// own.
	labelOf func(*Block) string

	// none stands in for a missing neighbour when free and insertFree
	// read the neighbours' states (see orNone): it is never free.
	none Block

	// planner records an expandable pool's allocations and plans its
	// steps, with PlanSteps (pool_expand_plan.go); else nil.
	planner *stepPlanner
	// churnState is an expandable pool's record of the pages it steals,
	// and the slack a workload that keeps stealing earned
	// (pool_expand_churn.go).
	churnState churn
}

// orNone returns b, or &p.none when b is nil, by index rather than by a
// branch (whether a block is the first or last of its segment is random
// on the mixed pair, and the compiler keeps a branch for an if on a
// pointer that is then loaded through). Only the states are read through
// it: absorb and split, which store to a neighbour, pick a stand-in among
// their own blocks by a conditional move instead (through orNone, the
// select cost fixed-size pairs, always predicted, about 1.6 ns).
func (p *Pool) orNone(b *Block) *Block {
	var i int
	if b != nil {
		i = 1
	}
	return [2]*Block{&p.none, b}[i&1]
}

// held is the bytes counted against the limit: the pool's reserved
// bytes and what shares the limit with it.
func (p *Pool) held() int64 { return p.sinks.own.Reserved.Current + p.sharedBytes() + p.external }

// sharedBytes is what other pools hold against this pool's limit (0
// without shared).
func (p *Pool) sharedBytes() int64 {
	if p.shared == nil {
		return 0
	}
	return p.shared()
}

// releaseSharedCache releases the cache of the pools that share the
// pool's Limit (releaseShared) and returns the bytes released.
func (p *Pool) releaseSharedCache(wait bool) (int64, error) {
	if p.releaseShared == nil {
		return 0, nil
	}
	return p.releaseShared(wait)
}

// demand is the pool's allocated bytes and what shares its limit: the
// placement scheduler's measure of what the device holds.
func (p *Pool) demand() int64 { return p.sinks.own.Allocated.Current + p.sharedBytes() + p.external }

// NewPool returns an empty pool over b. It panics if b is nil or cfg is
// invalid (see PoolConfig.Validate): both are programming errors.
func NewPool(b Backend, cfg PoolConfig) *Pool {
	return newPool(b, cfg, newMutex(), nil)
}

// newPool makes a pool guarded by mu whose statistics also go to parent
// (when not nil).
func newPool(b Backend, cfg PoolConfig, mu *mutex, parent *liveUsage) *Pool {
	if b == nil {
		panic("memory: NewPool: nil backend")
	}
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	p := &Pool{
		none:    Block{state: blockDead},
		mu:      mu,
		backend: b,
		name:    b.Name(),
		tier:    b.Tier(),
		cfg:     cfg,
		sinks:   usageSinks{parent: parent},
		sync:    cfg.StreamSync,
	}
	p.adviser, _ = b.(Adviser)
	p.poison = poisonFreed && hostMemory(b) // a budget-wrapped host backend too (the CPU device's)
	p.indexes = [2]*freeIndex{&p.small, &p.large}
	p.largeRest = SmallSize + 1
	if cfg.Expandable {
		vm, ok := b.(VirtualMemory)
		if !ok {
			panic(fmt.Sprintf("memory: NewPool: expandable segments need a VirtualMemory backend; %s is not one", p.name))
		}
		g := vm.Granularity()
		if err := checkGranularity("NewPool", p.name, g); err != nil {
			panic(err)
		}
		p.vm, p.page, p.largeRest = countedVM{VirtualMemory: vm, sinks: &p.sinks}, g, MinBlockSize
		p.pageShift = uint(bits.TrailingZeros64(uint64(g)))
		p.unified = true
		p.indexes[0] = &p.large
		p.tinyMax = tinySize
		p.placeMax = tinySize
		if cfg.PlanSteps && cfg.MaxSplitSize == 0 {
			p.placeMax = math.MaxInt64
			p.planner = &stepPlanner{}
		}
	}
	return p
}

// Expandable reports whether the pool grows expandable segments.
func (p *Pool) Expandable() bool { return p.vm != nil }

// Backend returns the backend the pool reserves its segments from.
func (p *Pool) Backend() Backend { return p.backend }

// Alloc returns a block of at least size bytes for work on stream s, from
// the cache when a free block fits, else from a new segment. The block's
// bytes are not zeroed. Errors: size <= 0 wraps ErrInvalidArgument; lack
// of memory (backend or Limit), even after releasing the cache, is an
// *OOMError; a closed pool returns ErrClosed.
func (p *Pool) Alloc(size int64, s Stream) (*Block, error) {
	p.mu.Lock()
	b, err := p.alloc(size, s, 0, RoleOther, "")
	p.mu.Unlock()
	return b, err
}

// alloc is Alloc with p.mu held, for an allocation of role asked for by
// op (for the history). When the backend is an Adviser, advice is applied
// to the block's pages (advise.go).
func (p *Pool) alloc(size int64, s Stream, advice Advice, role Role, op string) (*Block, error) {
	if size <= 0 || size > maxRequest {
		return nil, fmt.Errorf("memory: pool %s: cannot allocate %d bytes: %w", p.name, size, ErrInvalidArgument)
	}
	if p.closed {
		return nil, fmt.Errorf("memory: pool %s: alloc after close: %w", p.name, ErrClosed)
	}
	if len(p.pending) > 0 {
		_ = p.processEvents(false) // without waiting, there are no errors
	}
	rounded := RoundSize(size)
	// takeFree and the index's take, written out, the latter's class case
	// (no hot block: most takes on the mixed pair) in full. With reclaim
	// inlined in free (its segment work through leaveSegment, which the
	// compiler inlines: keep it under the inlining budget) and the common
	// cases of the index's insert and delete written out the same way in
	// split and insertFree, this saves four to five calls a pair: 804 ->
	// 749 instructions of the mixed pair in cachegrind
	// (bench/results/cpu-pool-pair-2026-12-02-b.md). Those copies must stay
	// in step with freeIndex.take, insert and delete.
	k := 0
	if rounded > SmallSize {
		k = 1
	}
	idx := p.indexes[k]
	var b *Block
	if rounded <= p.placeMax {
		var err error
		if b, err = p.allocPlaced(size, rounded, s, role); err != nil {
			p.settleSpanned()
			return nil, err
		}
	} else if lo, hi := (freeKey{size: rounded}), p.takeLimit(rounded); idx.hot == nil {
		if b = idx.takeClass(s, lo, hi); b != nil {
			idx.len--
		}
	} else {
		b = idx.take(s, lo, hi)
	}
	if b == nil {
		var err error
		if b, err = p.grow(size, rounded, s, role); err != nil {
			p.settleSpanned()
			return nil, err
		}
	}
	if p.shouldSplit(b, rounded) {
		p.split(b, rounded)
	}
	if p.adviser != nil {
		if err := p.advise(b, advice, s); err != nil {
			if b.size <= p.placeMax {
				p.freedPlaced(b)
			}
			p.insertFree(b)
			p.settleSpanned()
			return nil, err
		}
	}
	// A segment's first block in use brings its mapped bytes into the
	// spanned ones (liveUsage), once Allocated has the block's: only then
	// may InactiveSplit pass its peak (else an allocation lowers it).
	seg := b.seg
	first := seg.live == 0
	seg.live++
	seg.liveBytes += b.size
	b.state = blockLive
	b.requested = size
	b.role, b.hist = role, 0
	p.sinks.own.blockAllocated(b.size, size) // not through sinks: inlined
	if u := p.sinks.parent; u != nil {
		u.blockAllocated(b.size, size)
	}
	if first || p.spanDue {
		// Pages mapped for the block (spanDue) count once it has them.
		p.spanDue = false
		var d int64
		if first {
			d = seg.mapped
		}
		p.sinks.spannedBy(d)
	}
	if p.hist != nil {
		p.hist.alloc(p.tier, b, size, op)
	}
	if memoryCheck && p.vm != nil {
		if err := p.checkExpandable(); err != nil {
			panic(fmt.Sprintf("memory: pool %s, after allocating %s for %s on stream %#x (%s): %v", p.name, FormatBytes(size), role, uintptr(s), op, err))
		}
	}
	return b, nil
}

// Free returns a block to the cache, merging it with free neighbours. A
// block used on other streams (RecordStream) is cached only once their
// work queued so far is done; until then it counts as Active. Freeing a
// block twice, or one from another pool, returns an error wrapping
// ErrDoubleFree and changes nothing; freeing after Close returns
// ErrClosed.
func (p *Pool) Free(b *Block) error {
	if b == nil {
		return fmt.Errorf("memory: pool %s: free of a nil block: %w", p.name, ErrInvalidArgument)
	}
	p.mu.Lock()
	err := p.free(b)
	p.mu.Unlock()
	return err
}

// free is Free with p.mu held. A block used on other streams is not
// reusable until their work is done (pool_events.go); the error of a
// failed event recording leaves it freed all the same, and quarantined.
func (p *Pool) free(b *Block) error {
	if !b.ownedBy(p) {
		return fmt.Errorf("memory: pool %s: free of a block it does not own (already freed and merged, or from another pool): %w", p.name, ErrDoubleFree)
	}
	if p.closed {
		return fmt.Errorf("memory: pool %s: free after close: %w", p.name, ErrClosed)
	}
	if b.state != blockLive {
		return fmt.Errorf("memory: pool %s: block at %#x (%s) freed twice: %w", p.name, b.addr, FormatBytes(b.size), ErrDoubleFree)
	}
	if p.poison {
		poison(b)
	}
	if b.size <= p.placeMax {
		p.freedPlaced(b)
	}
	pending := b.cross != nil && len(b.cross.uses) > 0
	// The neighbours' states, loaded before the statistics' work, so that
	// the merge's tests (random on the mixed pair) are decided sooner:
	// nothing below changes them.
	prev, next := p.orNone(b.prev), p.orNone(b.next)
	prevFree, nextFree := prev.state == blockFree, next.state == blockFree
	if p.hist != nil {
		p.hist.free(p.tier, b)
	}
	p.sinks.own.blockFreed(b.size, b.requested) // not through sinks: inlined
	if u := p.sinks.parent; u != nil {
		u.blockFreed(b.size, b.requested)
	}
	b.requested = 0
	if pending {
		p.sinks.blockPending(b.size)
		return p.deferFree(b)
	}
	d := b.leaveSegment() // not through sinks: inlined
	p.sinks.own.spannedBy(d)
	if u := p.sinks.parent; u != nil {
		u.spannedBy(d)
	}
	p.merge(b, prevFree, nextFree)
	return nil
}

// settleSpanned looks at InactiveSplit's peak when pages were mapped into
// a segment in use during an allocation that failed (spanDue): they stay
// mapped, free.
func (p *Pool) settleSpanned() {
	if p.spanDue {
		p.spanDue = false
		p.sinks.spannedBy(0)
	}
}

// reclaim makes a live or pending block free: it leaves its segment's
// occupied bytes and joins the free index.
func (p *Pool) reclaim(b *Block) {
	p.sinks.spannedBy(b.leaveSegment())
	p.insertFree(b)
}

// leaveSegment takes a live or pending block out of its segment's
// occupied bytes and returns what the spanned bytes (liveUsage) move by
// (reclaim; free on the pair's path, where it is inlined): the segment's
// mapped bytes leave them when the block was the last in use there.
func (b *Block) leaveSegment() int64 {
	seg := b.seg
	seg.live--
	seg.liveBytes -= b.size
	var d int64
	if seg.live == 0 {
		d = -seg.mapped
	}
	return d
}

// insertFree marks b free, merges it with free neighbours and puts the
// result in its free index. b must not be in the index.
func (p *Pool) insertFree(b *Block) {
	p.merge(b, p.orNone(b.prev).state == blockFree, p.orNone(b.next).state == blockFree)
}

// merge is insertFree for a block whose neighbours' states are known:
// prevFree and nextFree report whether b.prev and b.next are free.
func (p *Pool) merge(b *Block, prevFree, nextFree bool) {
	b.state = blockFree
	tree, s := p.treeOf(b.seg), b.seg.stream
	if prevFree {
		prev := b.prev
		if tree.hot == prev { // tree.delete, written out (see alloc)
			tree.delete(s, prev)
		} else if tree.deleteClass(s, prev) {
			tree.len--
		}
		p.absorb(prev, b)
		b = prev
	}
	if nextFree {
		next := b.next
		if tree.hot == next { // tree.delete, written out (see alloc)
			tree.delete(s, next)
		} else if tree.deleteClass(s, next) {
			tree.len--
		}
		p.absorb(b, next)
	}
	// tree.insert, its bypass case written out (see alloc).
	if tree.bypass > 0 {
		tree.len++
		tree.bypass--
		tree.insertClass(s, b)
	} else {
		tree.insert(s, b)
	}
}

// absorb merges block r into its left neighbour l and recycles r.
func (p *Pool) absorb(l, r *Block) {
	l.size += r.size
	l.next = r.next
	// r's right neighbour points back at l; without one, r itself takes
	// the write (recycle clears it). A conditional move, not a branch:
	// whether a block ends its segment is random on the mixed pair.
	n := r.next
	if n == nil {
		n = r
	}
	n.prev = l
	p.recycle(r)
}

// treeOf returns the free index of a segment's blocks.
func (p *Pool) treeOf(seg *segment) *freeIndex { return seg.idx }

// newSegment returns a segment of the pool over r for stream s, of the
// small pool or the large one.
func (p *Pool) newSegment(r Region, s Stream, small bool) *segment {
	seg := &segment{pool: p, region: r, stream: s, small: small, idx: &p.large}
	if small {
		seg.idx = &p.small
	}
	return seg
}

// takeFree removes and returns the best cached block for rounded bytes on
// stream s, or nil.
func (p *Pool) takeFree(rounded int64, s Stream) *Block {
	// Picked without a branch on the size (random sizes mispredict it):
	// an index into indexes is a conditional move, where a choice of
	// pointers compiled to a branch.
	k := 0
	if rounded > SmallSize {
		k = 1
	}
	tree := p.indexes[k]
	// The best fit is the first block at or after (s, rounded, 0); it must
	// be on stream s, and with a MaxSplitSize not oversize for the request.
	// An oversize block is never carved up for a smaller request, and
	// serves a large one only if it wastes less than LargeBuffer. The block
	// found is the smallest that fits, so no other one can do better: both
	// rules bound the key from above.
	return tree.take(s, freeKey{size: rounded}, p.takeLimit(rounded))
}

// takeLimit is the key above the blocks that may serve a request of
// rounded bytes (see takeFree).
func (p *Pool) takeLimit(rounded int64) freeKey {
	hi := freeKey{size: math.MaxInt64}
	if max := p.cfg.MaxSplitSize; max > 0 {
		hi.size = max
		if rounded >= max {
			hi.size = rounded + LargeBuffer
		}
	}
	return hi
}

// shouldSplit reports whether the rest of b after rounded bytes is worth
// keeping as a block of its own: any 512 bytes in the small pool; more than
// SmallSize in the large pool (smaller rests would only serve requests the
// small pool takes), any in an expandable pool's (where they coalesce back
// and give their pages), and never for a request of MaxSplitSize or more,
// as PyTorch's should_split (the request's size, not the block's: a
// request just under MaxSplitSize whose new segment rounds past it is
// split; cached blocks of MaxSplitSize or more serve only such requests,
// takeLimit, so they are never split).
func (p *Pool) shouldSplit(b *Block, rounded int64) bool {
	// Small requests are below any MaxSplitSize (which exceeds
	// LargeBuffer), so the test applies to every segment.
	if max := p.cfg.MaxSplitSize; max > 0 && rounded >= max {
		return false
	}
	minRest := p.largeRest
	if b.seg.small {
		minRest = MinBlockSize
	}
	return b.size-rounded >= minRest
}

// split cuts b to rounded bytes and caches the rest as a free block.
func (p *Pool) split(b *Block, rounded int64) {
	r := p.newBlock()
	r.seg = b.seg
	r.addr = b.addr + uintptr(rounded)
	r.size = b.size - rounded
	r.state = blockFree
	r.next = b.next
	n := b.next // without a right neighbour, r takes the write (as in absorb)
	if n == nil {
		n = r
	}
	n.prev = r
	r.prev = b
	b.next = r
	b.size = rounded
	// The index's insert, its bypass case written out (see alloc).
	if tree := b.seg.idx; tree.bypass > 0 {
		tree.len++
		tree.bypass--
		tree.insertClass(b.seg.stream, r)
	} else {
		tree.insert(b.seg.stream, r)
	}
}

// newBlock returns a zeroed Block, recycled when one is spare.
func (p *Pool) newBlock() *Block {
	b := p.spare
	if b == nil {
		return new(Block)
	}
	p.spare = b.next
	*b = Block{}
	return b
}

// recycle marks b dead and keeps the struct for newBlock.
func (p *Pool) recycle(b *Block) {
	*b = Block{state: blockDead, next: p.spare}
	p.spare = b
}
