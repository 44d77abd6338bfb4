package memory

// SegmentInfo describes one segment of a pool, as torch.cuda.memory_snapshot
// does: where it is, and the blocks that tile it in address order.
type SegmentInfo struct {
	Addr   uintptr
	Size   int64
	Stream Stream
	Small  bool // belongs to the small pool
	Blocks []BlockInfo
}

// BlockInfo describes one block of a segment.
type BlockInfo struct {
	Addr      uintptr
	Size      int64 // rounded size
	Requested int64 // 0 when free
	Live      bool
	// Pending: freed, but waiting for work on other streams to finish
	// before it can be reused (Pool.RecordStream).
	Pending bool
}

// Segments returns a snapshot of the pool's segments, newest first. It
// allocates; it is meant for diagnosis and tests, not for hot paths.
func (p *Pool) Segments() []SegmentInfo {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]SegmentInfo, 0, p.nsegs)
	for seg := p.segs; seg != nil; seg = seg.next {
		si := SegmentInfo{Addr: seg.region.Addr, Size: seg.region.Size, Stream: seg.stream, Small: seg.small}
		for b := seg.first; b != nil; b = b.next {
			si.Blocks = append(si.Blocks, BlockInfo{Addr: b.addr, Size: b.size, Requested: b.requested,
				Live: b.state == blockLive, Pending: b.state == blockPending})
		}
		out = append(out, si)
	}
	return out
}
