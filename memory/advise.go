package memory

import "fmt"

// Adviser is implemented by backends whose memory takes placement advice:
// the CUDA managed backend (cuMemAdvise, cuMemPrefetchAsync). A pool over
// such a backend applies the advice of each allocation's placement to the
// allocation's block.
//
// Pool blocks are sub-ranges of segments, and advice works on pages, so
// Advise works on pages too:
//
//   - the flags in set are set on every page that the bytes
//     [off, off+size) of region r touch (the driver rounds the range out to
//     whole host pages itself), so a block that shares a page with a
//     neighbour gives that page its advice;
//   - the flags in clear are unset only on the pages lying wholly inside
//     the range, so a neighbour never loses advice it was given;
//   - AdvisePrefetchToDevice in set migrates the touching pages to the
//     device, ordered on stream s (in clear it means nothing).
//
// Advice never changes what a program computes, only where pages live and
// how they are mapped; the sharing above costs at most a page's worth of
// misplaced data per block edge.
type Adviser interface {
	Advise(r Region, off, size int64, set, clear Advice, s Stream) error
}

// advise applies the advice of an allocation to block b, about to be handed
// out for stream s, with p.mu held. Its pages may carry advice from earlier
// allocations: the flags the segment ever got and this allocation does not
// want are cleared. A segment never advised and an allocation without
// advice cost nothing (the all-managed baseline makes no advice calls).
func (p *Pool) advise(b *Block, advice Advice, s Stream) error {
	seg := b.seg
	set, clear := advice, seg.advice&^advice&^AdvisePrefetchToDevice
	if set == 0 && clear == 0 {
		return nil
	}
	// Recorded before the call: a call that fails half way may have set
	// some of the flags, and later allocations must clear them.
	seg.advice |= set &^ AdvisePrefetchToDevice
	if err := p.adviser.Advise(seg.region, b.offset(), b.size, set, clear, s); err != nil {
		return fmt.Errorf("memory: pool %s: advising %s at %#x (%s; clearing %s): %w",
			p.name, FormatBytes(b.size), b.addr, set, clear, err)
	}
	return nil
}

// prefetch migrates the pages of live block b to the device on stream s,
// when the backend is an Adviser; otherwise it does nothing.
func (p *Pool) prefetch(b *Block, s Stream) error {
	if p.adviser == nil {
		return nil
	}
	if err := p.adviser.Advise(b.seg.region, b.offset(), b.size, AdvisePrefetchToDevice, 0, s); err != nil {
		return fmt.Errorf("memory: pool %s: prefetching %s at %#x to the device: %w", p.name, FormatBytes(b.size), b.addr, err)
	}
	return nil
}
