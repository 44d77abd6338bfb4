package memory

// Stat is one statistic: its current value and the highest value it reached
// since the pool was made or its peaks were last reset.
type Stat struct{ Current, Peak int64 }

// add moves the current value by d and raises the peak when it is passed.
func (s *Stat) add(d int64) {
	s.Current += d
	if s.Current > s.Peak {
		s.Peak = s.Current
	}
}

// sub moves the current value down by d (>= 0); a peak cannot be passed.
func (s *Stat) sub(d int64) { s.Current -= d }

// resetPeak lowers the peak to the current value.
func (s *Stat) resetPeak() { s.Peak = s.Current }

// Usage is the statistics of one pool (one tier), or of several added up,
// in the spirit of torch.cuda.memory_stats. All byte counts are in bytes.
type Usage struct {
	// Allocated is the bytes in live blocks, counted at their rounded sizes.
	Allocated Stat
	// Requested is the bytes callers asked for in live blocks.
	Requested Stat
	// Reserved is the bytes held from the backend (all segments).
	Reserved Stat
	// Active is the bytes of live blocks plus those of blocks freed but not
	// yet reusable: blocks used on other streams (Pool.RecordStream) whose
	// work there has not finished. Without cross-stream use it equals
	// Allocated.
	Active Stat
	// InactiveSplit is the free bytes inside segments that also hold live
	// or pending blocks: memory that is reserved, unused and cannot be
	// given back, the pool's fragmentation.
	InactiveSplit Stat
	// Allocs and Frees count the calls that succeeded.
	Allocs, Frees int64
	// BackendAllocs and BackendFrees count the calls that reached the
	// backend (segments reserved and released).
	BackendAllocs, BackendFrees int64
	// PagesMapped and PagesUnmapped count the pages an expandable pool
	// mapped into its ranges and unmapped from them (each a driver call on
	// a GPU: cuMemMap, cuMemUnmap), and Syncs the device synchronisations
	// it waited for before unmapping pages other work may still use
	// (pool_expand.go). Steady training maps none; a step that does keeps
	// moving pages.
	PagesMapped, PagesUnmapped, Syncs int64
	// OOMs counts allocations that failed for lack of memory; CacheFlushes
	// the times the cached segments were released so that an allocation
	// could be retried.
	OOMs, CacheFlushes int64
}

// ResetPeaks lowers every peak to its current value.
func (u *Usage) ResetPeaks() {
	for _, s := range u.stats() {
		s.resetPeak()
	}
}

// stats lists the Stat fields, for loops over all of them.
func (u *Usage) stats() [5]*Stat {
	return [5]*Stat{&u.Allocated, &u.Requested, &u.Reserved, &u.Active, &u.InactiveSplit}
}

// liveUsage is a Usage as a pool keeps it up to date (usageSinks). The
// allocation path leaves Active's and InactiveSplit's current values out:
// they follow from Allocated and two sums that change off that path, and
// snapshot derives them. pending is the bytes of blocks freed but not yet
// reusable (Active = Allocated + pending); spanned is the bytes mapped in
// segments that hold live or pending blocks (every such block's bytes lie
// in one, so InactiveSplit = spanned - Active). The stored Usage's
// Active.Current and InactiveSplit.Current stay 0; InactiveSplit's peak
// is kept as the others are, Active's as blockAllocated says. An
// allocation then moves Allocated, Requested and Allocs, and a free
// Allocated, Requested and Frees, where keeping all five byte counts
// moved two more each: on a Xeon GPU host the statistics were about 5% of
// the mixed pair, and this took 0.7% off it (bench/results/gpu-s50.md).
type liveUsage struct {
	Usage
	pending, spanned int64
}

// active and inactive are Active's and InactiveSplit's current values.
func (u *liveUsage) active() int64   { return u.Allocated.Current + u.pending }
func (u *liveUsage) inactive() int64 { return u.spanned - u.Allocated.Current - u.pending }

// snapshot returns the Usage with every current value filled in, and
// Active's peak (see blockAllocated).
func (u *liveUsage) snapshot() Usage {
	v := u.Usage
	v.Active.Current, v.InactiveSplit.Current = u.active(), u.inactive()
	v.Active.Peak = max(v.Active.Peak, v.Allocated.Peak)
	return v
}

// ResetPeaks lowers every peak to its current value.
func (u *liveUsage) ResetPeaks() {
	u.Usage.ResetPeaks()
	u.Active.Current, u.InactiveSplit.Current = 0, 0
	u.Active.Peak, u.InactiveSplit.Peak = u.active(), u.inactive()
}

// usageSinks are the Usage records a pool keeps up to date: its own and,
// inside a Manager, the manager's total. Updating both in the same critical
// section makes the total's peaks true peaks, not sums of per-tier peaks.
type usageSinks struct {
	own    liveUsage
	parent *liveUsage
}

func (s *usageSinks) each(f func(u *liveUsage)) {
	f(&s.own)
	if s.parent != nil {
		f(s.parent)
	}
}

// blockAllocated records a block of rounded bytes allocated for requested.
// Active's peak is the higher of Allocated's and of the stored one, which
// counts only the times when blocks were pending (without them Active is
// Allocated): so it is looked at only while they are.
func (u *liveUsage) blockAllocated(rounded, requested int64) {
	u.Allocated.add(rounded)
	u.Requested.add(requested)
	u.Allocs++
	if u.pending != 0 {
		u.raisePendingPeak()
	}
}

// raisePendingPeak raises the stored Active peak to Active's current value
// where it passes it.
func (u *liveUsage) raisePendingPeak() { u.Active.Peak = max(u.Active.Peak, u.active()) }

// blockFreed records the free of a live block: its bytes leave Allocated
// and Requested (and Active, unless the caller then records it pending).
// InactiveSplit's peak is the caller's: spannedBy after the block leaves
// its segment.
func (u *liveUsage) blockFreed(rounded, requested int64) {
	u.dropBytes(rounded, requested)
	u.Frees++
}

// dropBytes takes a live block's bytes out of the byte counts, without
// counting a free (Pool.close releasing a leaked block).
func (u *liveUsage) dropBytes(rounded, requested int64) {
	u.Allocated.sub(rounded)
	u.Requested.sub(requested)
}

// blockPending records a freed block of rounded bytes that stays active
// until its work on other streams is done.
func (s *usageSinks) blockPending(rounded int64) {
	s.each(func(u *liveUsage) { u.pending += rounded })
}

// blockReclaimed records a pending block of rounded size bytes becoming
// reusable (or being released by Close).
func (s *usageSinks) blockReclaimed(rounded int64) {
	s.each(func(u *liveUsage) { u.pending -= rounded })
}

// spannedBy moves the bytes mapped in segments in use by d (a segment's
// first or last block in use came or went, or pages were mapped or
// unmapped in one in use) and raises InactiveSplit's peak where its
// current value passes it: call it after every change of Active or of the
// spanned bytes that may raise InactiveSplit (a free, a reclaim, the end
// of an allocation that mapped pages: moveSpanned), with d = 0 for none.
func (s *usageSinks) spannedBy(d int64) {
	s.own.spannedBy(d)
	if p := s.parent; p != nil {
		p.spannedBy(d)
	}
}

// moveSpanned moves the spanned bytes by d without looking at
// InactiveSplit's peak: pages mapped during an allocation, which looks at
// it before it returns (Pool.spanDue).
func (s *usageSinks) moveSpanned(d int64) {
	s.each(func(u *liveUsage) { u.spanned += d })
}

func (u *liveUsage) spannedBy(d int64) {
	if d != 0 {
		u.spanned += d
	}
	if in := u.inactive(); in > u.InactiveSplit.Peak {
		u.InactiveSplit.Peak = in
	}
}

// segmentReserved records a segment of size bytes taken from the backend.
func (s *usageSinks) segmentReserved(size int64) {
	s.each(func(u *liveUsage) { u.Reserved.add(size); u.BackendAllocs++ })
}

// segmentReleased records a segment of size bytes given back.
func (s *usageSinks) segmentReleased(size int64) {
	s.each(func(u *liveUsage) { u.Reserved.sub(size); u.BackendFrees++ })
}

// pagesMapped records bytes of pages mapped into an expandable segment:
// reserved memory, whether the pages are new or moved from elsewhere.
func (s *usageSinks) pagesMapped(bytes int64) { s.each(func(u *liveUsage) { u.Reserved.add(bytes) }) }

// pagesUnmapped records bytes of pages unmapped from an expandable
// segment (to be released, or mapped again elsewhere).
func (s *usageSinks) pagesUnmapped(bytes int64) { s.each(func(u *liveUsage) { u.Reserved.sub(bytes) }) }

// pagesCreated and pagesReleased count pages taken from and given back to
// a VirtualMemory backend: its backend calls.
func (s *usageSinks) pagesCreated(n int64)  { s.each(func(u *liveUsage) { u.BackendAllocs += n }) }
func (s *usageSinks) pagesReleased(n int64) { s.each(func(u *liveUsage) { u.BackendFrees += n }) }

func (s *usageSinks) oom()        { s.each(func(u *liveUsage) { u.OOMs++ }) }
func (s *usageSinks) cacheFlush() { s.each(func(u *liveUsage) { u.CacheFlushes++ }) }
