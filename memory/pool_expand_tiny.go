package memory

// Tiny blocks of expandable segments (pool_expand.go).
//
// Training allocates hundreds of blocks of a few hundred bytes to a few
// KiB that live for the whole run (the fp16 model's per-parameter state,
// scalars), once, in the middle of a step, while short-lived blocks are
// live all around. Best fit puts each into the smallest free fragment that
// fits, anywhere in the range, so they end up scattered over pages whose
// other blocks die soon after: each such page then holds a few KiB of live
// data and can be neither stolen nor released (on PyTorch's fp16 trace
// with checkpointing, scaled, one to three pages almost all free at the
// peak, pinned by these blocks alone: 1-2% of reserved at small scales).
//
// So an expandable pool places a request of up to tinySize bytes among
// the tiny blocks already live: of the free blocks that fit, in best-fit
// order (the first tinyProbe of them), it takes the first that starts, or
// ends, in a page already holding a live tiny block, the request at that
// end; when none does, the best fit. Each segment counts the live tiny
// blocks starting in each page. Over the traces scaled 0.2x to 4x (40
// log-spaced scales) this took the fp16 trace with checkpointing from a
// mean reserved/requested of 1.0631 to 1.0563 (max 1.162 to 1.147; 31
// scales above 1.02 instead of 34) and fp32 from 1.0056 to 1.0047 (max
// 1.0220 to 1.0182); on another 60 scales, 1.0620 to 1.0518 and 1.0058
// to 1.0051. It is a placement rule, so single scales move both ways
// (fp16 x0.75: 1.0369 to 1.0480; x0.5: 1.0257 to 1.0146).

// tinySize is the largest request an expandable pool places among the
// live tiny blocks rather than by best fit alone.
const tinySize = 4 << 10

// tinyProbe bounds the free blocks a tiny request looks at.
const tinyProbe = 64

// allocPlaced is an expandable pool's choice of the free block (not in
// the index) that starts where a request of rounded bytes on stream s
// goes: where the running step plan puts it (pool_expand_plan.go); with
// step plans but none running, for a request up to SmallSize or of a size
// the pool's first allocations had (stepPlanner.firsts), right after the
// highest live block (takeTop); else for a tiny request among the
// live tiny blocks, else the best fit, from
// the cache or else from growing a segment. It records the allocation for
// the step plans and counts a tiny block in its page (free uncounts
// blocks of up to tinyMax bytes; for a request of MaxSplitSize or more
// the block is handed out whole).
func (p *Pool) allocPlaced(size, rounded int64, s Stream, role Role) (*Block, error) {
	var b *Block
	if sp := p.planner; sp != nil && sp.plan != nil {
		b = p.takePlanned(rounded, s)
	} else if sp != nil && (rounded <= SmallSize || sp.first(rounded)) && sp.topping() {
		b = p.takeTop(rounded, s)
	}
	if b == nil && rounded <= p.tinyMax {
		b = p.takeTiny(rounded, s)
	} else if b == nil {
		b = p.takeFree(rounded, s)
	}
	if b == nil {
		var err error
		if b, err = p.grow(size, rounded, s, role); err != nil {
			return nil, err
		}
	}
	if p.planner != nil {
		p.planner.allocated(p, b, rounded, s)
	}
	if rounded <= p.tinyMax && (b.size == rounded || p.shouldSplit(b, rounded)) {
		p.countTiny(b, 1)
	}
	return b, nil
}

// freedPlaced undoes allocPlaced's records for a block of an expandable
// pool that is freed. Not inlined: it is off the classic pool's path.
//
//go:noinline
func (p *Pool) freedPlaced(b *Block) {
	if b.size <= p.tinyMax {
		p.countTiny(b, -1)
	}
	if p.planner != nil {
		p.planner.released(b)
	}
}

// takeTiny removes from the index and returns the free block for a tiny
// request (see above), cut to start where the request goes; nil when no
// free block fits.
func (p *Pool) takeTiny(rounded int64, s Stream) *Block {
	if p.tinyLive == 0 { // no page holds one: the best fit
		return p.takeFree(rounded, s)
	}
	idx := p.indexes[0]
	hi := p.takeLimit(rounded)
	var first, pick *Block
	var at uintptr
	n := 0
	idx.ascendFrom(s, freeKey{size: rounded}, func(b *Block) bool {
		if !keyOf(b).less(hi) {
			return false
		}
		if first == nil {
			first = b
		}
		if x := b.seg.x; x != nil {
			off := int64(b.addr - b.seg.region.Addr)
			if end := off + b.size - rounded; p.tinyIn(x, off, rounded) {
				pick, at = b, b.addr
				return false
			} else if p.tinyIn(x, end, rounded) {
				pick, at = b, b.seg.region.Addr+uintptr(end)
				return false
			}
		}
		n++
		return n < tinyProbe
	})
	if pick == nil {
		if first == nil {
			return nil
		}
		pick, at = first, first.addr
	}
	idx.delete(s, pick)
	if at == pick.addr {
		return pick
	}
	left, mid, _ := p.cut(pick, at, pick.addr+uintptr(pick.size), blockFree)
	idx.insert(s, left)
	return mid
}

// tinyIn reports whether n bytes at offset off lie in one page, one that
// holds a live tiny block.
func (p *Pool) tinyIn(x *expansion, off, n int64) bool {
	i := off >> p.pageShift
	return i == (off+n-1)>>p.pageShift && i < int64(len(x.tiny)) && x.tiny[i] > 0
}

// countTiny adds d to the count of live tiny blocks in the page where b
// starts, when b is in an expandable segment. Not inlined: it is off the
// classic pool's path, in free and alloc.
//
//go:noinline
func (p *Pool) countTiny(b *Block, d int32) {
	x := b.seg.x
	if x == nil {
		return
	}
	i := int((b.addr - b.seg.region.Addr) >> p.pageShift)
	if i >= len(x.tiny) {
		x.tiny = append(x.tiny, make([]int32, i+1-len(x.tiny))...)
	}
	x.tiny[i] += d
	p.tinyLive += int64(d)
}
