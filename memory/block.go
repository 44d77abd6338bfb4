package memory

// Stream identifies a stream of device work (a CUstream handle on the GPU).
// Stream 0 is the default stream, and the only one on the host. Blocks are
// cached per stream: a block freed on stream S is only reused for stream S,
// so its memory is never handed to work that could run before S is done
// with it.
type Stream uintptr

// blockState is where a Block is in its life.
type blockState uint8

const (
	blockFree    blockState = iota // in a free tree, reusable
	blockLive                      // handed out, not yet freed
	blockPending                   // freed, waiting for work on other streams to finish (RecordStream)
	blockDead                      // merged into a neighbour or released; waiting in the spare list
	blockHole                      // address space of an expandable segment with no memory mapped (pool_expand.go)
	blockStale                     // address space whose pages were lent to another place and are still mapped here too (pool_expand.go)
)

// Block is a span of a segment: handed out by Pool.Alloc while live, kept in
// the pool's free indexes while free. The pool recycles Block structs, so a
// *Block must not be used after it is freed: freeing it again is reported
// as ErrDoubleFree as long as the struct has not been handed out again.
//
// A Block fits one 64-byte cache line: its pool, stream and offset come
// from its segment, and the rarely used cross-stream state sits behind a
// pointer. The pool's hot path walks blocks and their neighbours, and on a
// workload of a few hundred blocks halving their footprint keeps them in
// the first-level cache.
type Block struct {
	seg        *segment // nil once the struct is recycled
	prev, next *Block   // neighbours in the segment, by address; next also links spares
	addr       uintptr
	size       int64     // rounded size: what the block occupies
	requested  int64     // the caller's size while live, 0 while free
	cross      *crossUse // nil until the block is used on another stream
	state      blockState
	role       Role   // the role of the allocation it serves while live (Manager)
	hist       uint32 // while live: its allocation event's Seq mod 2^32-1, plus 1, or 0 (history.go)
}

// crossUse is a block's use on streams other than its own (pool_events.go).
// uses lists those streams while the block is live; while it is pending,
// events counts the events still to complete, and quarantined marks a
// block whose events could not all be recorded: it is never reused, only
// released by Close.
type crossUse struct {
	uses        []Stream
	events      int32
	quarantined bool
}

// ownedBy reports whether b is a block of pool p that was not recycled.
func (b *Block) ownedBy(p *Pool) bool { return b.seg != nil && b.seg.pool == p }

// offset is b's offset from the start of its segment.
func (b *Block) offset() int64 { return int64(b.addr - b.seg.region.Addr) }

// Addr is the block's address for the device that owns its tier (a host
// address on the host tier). It is 512-byte aligned when the backend's
// regions are. It is 0 once the block is freed.
func (b *Block) Addr() uintptr {
	if b.state != blockLive {
		return 0
	}
	return b.addr
}

// Host is the CPU's view of exactly the requested bytes, nil when the tier
// is not host-accessible (plain device memory) or the block is freed. The
// bytes are not zeroed: a reused block holds what its last user wrote.
func (b *Block) Host() []byte {
	if b.state != blockLive {
		return nil
	}
	h := b.seg.region.Host
	if h == nil {
		return nil
	}
	off := b.offset()
	end := off + b.requested
	return h[off:end:end]
}

// Size is the size that was requested.
func (b *Block) Size() int64 { return b.requested }

// Stream is the stream the block was allocated on (0 once it is freed and
// recycled).
func (b *Block) Stream() Stream {
	if b.seg == nil {
		return 0
	}
	return b.seg.stream
}

// segment is one region reserved from the backend, tiled by blocks. The
// fields every Alloc and Free reads or writes come first, in one cache
// line (on the mixed pair the segments are many and the line is often
// cold).
type segment struct {
	pool      *Pool
	stream    Stream
	live      int    // blocks in it that are not free: live or pending
	liveBytes int64  // their rounded sizes
	mapped    int64  // bytes with memory behind them: region.Size, less an expandable segment's holes
	small     bool   // belongs to the small pool
	advice    Advice // every advice flag ever set on some of its pages (advise.go)
	// idx is the free index of its blocks (the pool's small or large
	// one): kept here so that the pair finds it without a branch on small,
	// which random sizes mispredict. (With it the struct is 128 bytes, a
	// size class whose objects start on cache lines: at 136, its first
	// line's fields straddled two lines and the mixed pair missed more.)
	idx        *freeIndex
	region     Region
	first      *Block // the block at offset 0
	prev, next *segment
	x          *expansion // an expandable segment's pages; nil for a classic one
}

// spanned is the segment's contribution to the spanned bytes (liveUsage):
// its mapped bytes while it holds live or pending blocks.
func (s *segment) spanned() int64 {
	if s.live == 0 {
		return 0
	}
	return s.mapped
}
