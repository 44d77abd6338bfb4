package memviz

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/strata-ml/strata/memory"
)

// SnapshotAt rebuilds the snapshot of the moment just after h.Events[n-1]
// (n = 0: the moment of start), from start, a snapshot taken just before
// h's first event, and the events that followed: segments reserved,
// mapped, unmapped and released, blocks allocated and freed. It is how a
// segment map of a step's peak is drawn without stopping the step there.
// Next to each other, a hole and a stale range (pool_expand.go) show as
// one unmapped block. Pending blocks of start count as free (the history
// does not record when they become reusable), and the usage of each tier
// holds current values only (its peaks are the current values).
func SnapshotAt(start memory.Snapshot, h *memory.History, n int) (memory.Snapshot, error) {
	if err := checkHistory("SnapshotAt", h); err != nil {
		return memory.Snapshot{}, err
	}
	if n < 0 || n > len(h.Events) {
		return memory.Snapshot{}, fmt.Errorf("memviz: SnapshotAt %d of %d events", n, len(h.Events))
	}
	type seg struct {
		info   memory.SegmentInfo
		mapped [][2]int64 // offsets, sorted, disjoint
		live   map[uintptr]memory.BlockInfo
	}
	segs := map[uintptr]*seg{}
	var backends [memory.NumTiers]string
	for _, ts := range start.Tiers {
		if ts.Tier >= memory.NumTiers {
			return memory.Snapshot{}, fmt.Errorf("memviz: SnapshotAt: the start snapshot has tier %d; there are %d tiers: %w",
				ts.Tier, memory.NumTiers, memory.ErrInvalidArgument)
		}
		backends[ts.Tier] = ts.Backend
		for _, si := range ts.Segments {
			if si.Tier >= memory.NumTiers {
				return memory.Snapshot{}, fmt.Errorf("memviz: SnapshotAt: the start snapshot's segment at %#x has tier %d; there are %d tiers: %w",
					si.Addr, si.Tier, memory.NumTiers, memory.ErrInvalidArgument)
			}
			s := &seg{info: si, live: map[uintptr]memory.BlockInfo{}}
			s.info.Blocks = nil
			for _, b := range si.Blocks {
				off := int64(b.Addr - si.Addr)
				if !b.Unmapped {
					s.mapped = addInterval(s.mapped, off, off+b.Size)
				}
				if b.Live {
					s.live[b.Addr] = b
				}
			}
			segs[si.Addr] = s
		}
	}
	for t, b := range h.Backends {
		if b != "" {
			backends[t] = b
		}
	}
	find := func(addr uintptr) *seg {
		for _, s := range segs {
			if addr >= s.info.Addr && int64(addr-s.info.Addr) < s.info.Size {
				return s
			}
		}
		return nil
	}
	for i := range h.Events[:n] {
		e := &h.Events[i]
		switch e.Kind {
		case memory.EventReserve:
			s := segs[e.Segment]
			if s == nil {
				// A classic segment is reserved whole; an expandable one's
				// address space first (Size 0), its pages later.
				whole := e.Addr == e.Segment && e.Size == e.SegmentSize
				s = &seg{info: memory.SegmentInfo{Tier: e.Tier, Addr: e.Segment, Size: e.SegmentSize, Stream: e.Stream, Small: e.Small,
					Expandable: !whole}, live: map[uintptr]memory.BlockInfo{}}
				segs[e.Segment] = s
			}
			if e.Size > 0 {
				off := int64(e.Addr - e.Segment)
				s.mapped = addInterval(s.mapped, off, off+e.Size)
			}
		case memory.EventRelease:
			s := segs[e.Segment]
			if s == nil {
				return memory.Snapshot{}, fmt.Errorf("memviz: event %d releases memory of a segment at %#x the snapshot does not hold", e.Seq, e.Segment)
			}
			off := int64(e.Addr - e.Segment)
			s.mapped = removeInterval(s.mapped, off, off+e.Size)
			// A classic segment goes whole; an expandable one's address
			// space goes last (Size 0).
			if len(s.mapped) == 0 && (e.Size == 0 || e.Addr == e.Segment && e.Size == e.SegmentSize) {
				delete(segs, e.Segment)
			}
		case memory.EventAlloc:
			s := find(e.Addr)
			if s == nil {
				return memory.Snapshot{}, fmt.Errorf("memviz: event %d allocates at %#x, in no segment", e.Seq, e.Addr)
			}
			s.live[e.Addr] = memory.BlockInfo{Addr: e.Addr, Size: e.Block, Requested: e.Size, Live: true, Role: e.Role,
				Recorded: true, AllocSeq: e.Seq, Op: e.Op}
		case memory.EventFree:
			if s := find(e.Addr); s != nil {
				delete(s.live, e.Addr)
			}
		}
	}
	out := memory.Snapshot{Time: start.Time, HistoryTime: start.HistoryTime}
	if n > 0 {
		at := h.Events[n-1].Time
		out.Time, out.HistoryTime = h.Start.Add(time.Duration(at)), at
	}
	byTier := map[memory.Tier]*memory.TierSnapshot{}
	for _, ts := range start.Tiers { // every tier of start, even without segments
		byTier[ts.Tier] = &memory.TierSnapshot{Tier: ts.Tier, Backend: backends[ts.Tier]}
	}
	for _, s := range segs {
		ts := byTier[s.info.Tier]
		if ts == nil {
			ts = &memory.TierSnapshot{Tier: s.info.Tier, Backend: backends[s.info.Tier]}
			byTier[s.info.Tier] = ts
		}
		si := s.info
		live := make([]memory.BlockInfo, 0, len(s.live))
		for _, b := range s.live {
			live = append(live, b)
		}
		slices.SortFunc(live, func(a, b memory.BlockInfo) int { return cmp.Compare(a.Addr, b.Addr) })
		var pos int64
		gap := func(end int64) { // free and unmapped blocks over [pos, end)
			for pos < end {
				mapped, next := intervalAt(s.mapped, pos, end)
				si.Blocks = append(si.Blocks, memory.BlockInfo{Addr: si.Addr + uintptr(pos), Size: next - pos, Unmapped: !mapped})
				pos = next
			}
		}
		for _, b := range live {
			off := int64(b.Addr - si.Addr)
			gap(off)
			si.Blocks = append(si.Blocks, b)
			pos = off + b.Size
			ts.Usage.Allocated.Current += b.Size
			ts.Usage.Requested.Current += b.Requested
			ts.Usage.Active.Current += b.Size
		}
		gap(si.Size)
		si.Mapped = 0
		for _, iv := range s.mapped {
			si.Mapped += iv[1] - iv[0]
		}
		ts.Usage.Reserved.Current += si.Mapped
		ts.Segments = append(ts.Segments, si)
	}
	for t := range memory.NumTiers {
		ts := byTier[t]
		if ts == nil {
			continue
		}
		slices.SortFunc(ts.Segments, func(a, b memory.SegmentInfo) int { return cmp.Compare(b.Addr, a.Addr) })
		for _, st := range []*memory.Stat{&ts.Usage.Allocated, &ts.Usage.Requested, &ts.Usage.Reserved, &ts.Usage.Active} {
			st.Peak = st.Current
		}
		out.Tiers = append(out.Tiers, *ts)
	}
	return out, nil
}

// addInterval adds [lo, hi) to a sorted list of disjoint intervals,
// merging where they touch.
func addInterval(ivs [][2]int64, lo, hi int64) [][2]int64 {
	var out [][2]int64
	for _, iv := range ivs {
		switch {
		case iv[1] < lo || iv[0] > hi:
			out = append(out, iv)
		default:
			lo, hi = min(lo, iv[0]), max(hi, iv[1])
		}
	}
	out = append(out, [2]int64{lo, hi})
	slices.SortFunc(out, func(a, b [2]int64) int { return cmp.Compare(a[0], b[0]) })
	return out
}

// removeInterval takes [lo, hi) out of a sorted list of disjoint intervals.
func removeInterval(ivs [][2]int64, lo, hi int64) [][2]int64 {
	var out [][2]int64
	for _, iv := range ivs {
		if iv[1] <= lo || iv[0] >= hi {
			out = append(out, iv)
			continue
		}
		if iv[0] < lo {
			out = append(out, [2]int64{iv[0], lo})
		}
		if iv[1] > hi {
			out = append(out, [2]int64{hi, iv[1]})
		}
	}
	return out
}

// intervalAt reports whether pos lies in one of the intervals, and where
// that stops being so (at most end).
func intervalAt(ivs [][2]int64, pos, end int64) (bool, int64) {
	for _, iv := range ivs {
		if pos < iv[0] {
			return false, min(end, iv[0])
		}
		if pos < iv[1] {
			return true, min(end, iv[1])
		}
	}
	return false, end
}

// PeakEvent returns the number of events of h up to and including the
// one after which the tier's allocated bytes were highest (the first such
// moment), for SnapshotAt; 0 when no event raised them (or h is nil, or t
// is not a tier). Events of a tier or role that does not exist are skipped.
func PeakEvent(h *memory.History, t memory.Tier) int {
	if h == nil || t >= memory.NumTiers {
		return 0
	}
	r := newReplayer(h)
	best, at := r.tiers[t].total(), 0
	for i := range h.Events {
		e := &h.Events[i]
		r.apply(e)
		if e.Tier == t && e.Kind == memory.EventAlloc {
			if v := r.tiers[t].total(); v > best {
				best, at = v, i+1
			}
		}
	}
	return at
}
