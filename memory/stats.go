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
	// blocks: memory that is reserved, unused and cannot be given back, the
	// pool's fragmentation.
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

// usageSinks are the Usage records a pool keeps up to date: its own and,
// inside a Manager, the manager's total. Updating both in the same critical
// section makes the total's peaks true peaks, not sums of per-tier peaks.
type usageSinks struct {
	own    Usage
	parent *Usage
}

func (s *usageSinks) each(f func(u *Usage)) {
	f(&s.own)
	if s.parent != nil {
		f(s.parent)
	}
}

func (u *Usage) blockAllocated(rounded, requested int64) {
	u.Allocated.add(rounded)
	u.Requested.add(requested)
	u.Active.add(rounded)
	u.Allocs++
}

// blockFreed lowers Active by active bytes: rounded, or 0 for a block
// that stays active.
func (u *Usage) blockFreed(rounded, requested, active int64) {
	u.dropBytes(rounded, requested, active)
	u.Frees++
}

// dropBytes takes a live block's bytes out of the byte counts, without
// counting a free (Pool.close releasing a leaked block).
func (u *Usage) dropBytes(rounded, requested, active int64) {
	u.Allocated.sub(rounded)
	u.Requested.sub(requested)
	u.Active.sub(active)
}

// blockReclaimed records a pending block of rounded size bytes becoming
// reusable (or being released by Close).
func (s *usageSinks) blockReclaimed(rounded int64) {
	s.each(func(u *Usage) { u.Active.sub(rounded) })
}

// inactiveSplit moves the inactive-split bytes by d.
func (s *usageSinks) inactiveSplit(d int64) {
	if d == 0 {
		return
	}
	s.own.InactiveSplit.add(d)
	if p := s.parent; p != nil {
		p.InactiveSplit.add(d)
	}
}

// segmentReserved records a segment of size bytes taken from the backend.
func (s *usageSinks) segmentReserved(size int64) {
	s.each(func(u *Usage) { u.Reserved.add(size); u.BackendAllocs++ })
}

// segmentReleased records a segment of size bytes given back.
func (s *usageSinks) segmentReleased(size int64) {
	s.each(func(u *Usage) { u.Reserved.sub(size); u.BackendFrees++ })
}

// pagesMapped records bytes of pages mapped into an expandable segment:
// reserved memory, whether the pages are new or moved from elsewhere.
func (s *usageSinks) pagesMapped(bytes int64) { s.each(func(u *Usage) { u.Reserved.add(bytes) }) }

// pagesUnmapped records bytes of pages unmapped from an expandable
// segment (to be released, or mapped again elsewhere).
func (s *usageSinks) pagesUnmapped(bytes int64) { s.each(func(u *Usage) { u.Reserved.sub(bytes) }) }

// pagesCreated and pagesReleased count pages taken from and given back to
// a VirtualMemory backend: its backend calls.
func (s *usageSinks) pagesCreated(n int64)  { s.each(func(u *Usage) { u.BackendAllocs += n }) }
func (s *usageSinks) pagesReleased(n int64) { s.each(func(u *Usage) { u.BackendFrees += n }) }

func (s *usageSinks) oom()        { s.each(func(u *Usage) { u.OOMs++ }) }
func (s *usageSinks) cacheFlush() { s.each(func(u *Usage) { u.CacheFlushes++ }) }
