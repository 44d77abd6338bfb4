package memory

import "time"

// SegmentInfo describes one segment of a pool, as torch.cuda.memory_snapshot
// does: where it is, and the blocks that tile it in address order.
type SegmentInfo struct {
	Tier   Tier    `json:"tier"`
	Addr   uintptr `json:"addr"`
	Size   int64   `json:"size"`
	Stream Stream  `json:"stream"`
	Small  bool    `json:"small"` // belongs to the small pool
	// Expandable: an expandable segment, Size bytes of address space of
	// which Mapped have memory behind them (pool_expand.go).
	Expandable bool        `json:"expandable,omitempty"`
	Mapped     int64       `json:"mapped"`
	Blocks     []BlockInfo `json:"blocks"`
}

// BlockInfo describes one block of a segment.
type BlockInfo struct {
	Addr      uintptr `json:"addr"`
	Size      int64   `json:"size"`      // rounded size
	Requested int64   `json:"requested"` // 0 when free
	Live      bool    `json:"live"`
	// Pending: freed, but waiting for work on other streams to finish
	// before it can be reused (Pool.RecordStream).
	Pending bool `json:"pending,omitempty"`
	// Unmapped: address space of an expandable segment with no memory
	// behind it (pages returned, or never mapped).
	Unmapped bool `json:"unmapped,omitempty"`
	// Role is the live block's role (RoleOther for blocks allocated from
	// a Pool directly).
	Role Role `json:"role"`
	// Recorded says that the allocation history still holds the event
	// that allocated the live block: AllocSeq is its Seq and Op the op
	// that asked for it.
	Recorded bool   `json:"recorded,omitempty"`
	AllocSeq uint64 `json:"alloc_seq,omitempty"`
	Op       string `json:"op,omitempty"`
	// Label is the name Allocation.SetLabel gave the live block's
	// allocation ("" without one, and in a pool of its own).
	Label string `json:"label,omitempty"`
}

// Segments returns a snapshot of the pool's segments, newest first. It
// allocates; it is meant for diagnosis and tests, not for hot paths.
func (p *Pool) Segments() []SegmentInfo {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.segments()
}

// segments is Segments with p.mu held.
func (p *Pool) segments() []SegmentInfo {
	out := make([]SegmentInfo, 0, p.nsegs)
	for seg := p.segs; seg != nil; seg = seg.next {
		si := SegmentInfo{Tier: p.tier, Addr: seg.region.Addr, Size: seg.region.Size, Stream: seg.stream, Small: seg.small,
			Expandable: seg.x != nil, Mapped: seg.mapped}
		for b := seg.first; b != nil; b = b.next {
			bi := BlockInfo{Addr: b.addr, Size: b.size, Requested: b.requested,
				Live: b.state == blockLive, Pending: b.state == blockPending, Unmapped: b.state == blockHole || b.state == blockStale}
			if bi.Live {
				bi.Role = b.role
				if p.labelOf != nil {
					bi.Label = p.labelOf(b)
				}
				if p.hist != nil {
					if seq := p.hist.allocSeq(p.tier, b); seq != NoSeq {
						bi.Recorded, bi.AllocSeq, bi.Op = true, seq, p.hist.at(seq).Op
					}
				}
			}
			si.Blocks = append(si.Blocks, bi)
		}
		out = append(out, si)
	}
	return out
}

// Snapshot is the state of a manager's memory at one moment: what
// torch.cuda.memory._snapshot() gives, as JSON through encoding/json.
type Snapshot struct {
	// Time is the wall-clock time of the snapshot; HistoryTime the same
	// moment on the time axis of the history being recorded (ns since
	// History.Start), or -1 without one.
	Time        time.Time      `json:"time"`
	HistoryTime int64          `json:"history_t_ns"`
	Tiers       []TierSnapshot `json:"tiers"`
}

// TierSnapshot is one tier of a Snapshot.
type TierSnapshot struct {
	Tier     Tier          `json:"tier"`
	Backend  string        `json:"backend"`
	Usage    Usage         `json:"usage"`
	Segments []SegmentInfo `json:"segments"`
}

// Snapshot returns every segment and block of every tier with a backend,
// with the tiers' statistics, consistently (under the manager's lock).
func (m *Manager) Snapshot() Snapshot {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := Snapshot{Time: time.Now(), HistoryTime: -1}
	if m.hist != nil {
		s.HistoryTime = int64(s.Time.Sub(m.hist.start))
	}
	for t, p := range m.pools {
		if p != nil {
			s.Tiers = append(s.Tiers, TierSnapshot{Tier: Tier(t), Backend: p.name, Usage: p.sinks.own.snapshot(), Segments: p.segments()})
		}
	}
	return s
}
