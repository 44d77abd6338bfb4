package memory

import (
	"fmt"
	"time"
	"unsafe"
)

// EventKind is what an Event of the allocation history records.
type EventKind uint8

const (
	// EventAlloc is a block handed out: Size requested bytes in a block
	// of Block bytes at Addr.
	EventAlloc EventKind = iota
	// EventFree is a block freed (it may stay pending on other streams'
	// work; see Pool.RecordStream), or a live block released by Close.
	// AllocSeq is its EventAlloc's Seq.
	EventFree
	// EventReserve is memory taken from the backend: a new segment, or
	// physical pages mapped into an expandable segment (Size bytes at
	// Addr).
	EventReserve
	// EventRelease is memory given back to the backend: a segment, or
	// pages unmapped from an expandable segment.
	EventRelease
	// EventMark is a label set by Manager.MarkHistory, such as a training
	// step's start. Op holds the label.
	EventMark
	numEventKinds
)

var eventKindNames = [numEventKinds]string{"alloc", "free", "reserve", "release", "mark"}

func (k EventKind) String() string {
	if k < numEventKinds {
		return eventKindNames[k]
	}
	return fmt.Sprintf("EventKind(%d)", uint8(k))
}

// MarshalText writes the kind's name, for JSON.
func (k EventKind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// UnmarshalText reads a kind's name, so that a History read back from its
// JSON is the History written.
func (k *EventKind) UnmarshalText(b []byte) error {
	for i, n := range eventKindNames {
		if n == string(b) {
			*k = EventKind(i)
			return nil
		}
	}
	return fmt.Errorf("memory: unknown event kind %q: %w", b, ErrInvalidArgument)
}

// Event is one entry of the allocation history.
type Event struct {
	// Seq numbers the events of a manager (or standalone pool) from 0, in
	// order, across every recording (a manager's pool's History skips the
	// Seqs of other tiers' events).
	Seq uint64 `json:"seq"`
	// Time is nanoseconds since History.Start.
	Time   int64     `json:"t_ns"`
	Kind   EventKind `json:"kind"`
	Tier   Tier      `json:"tier"`
	Role   Role      `json:"role"`
	Stream Stream    `json:"stream"`
	Addr   uintptr   `json:"addr"`
	// Size is the requested bytes of an allocation, or the bytes of a
	// reservation or release.
	Size int64 `json:"size"`
	// Block is the rounded size an allocation occupies.
	Block int64 `json:"block,omitempty"`
	// AllocSeq is, for a free, the Seq of the allocation's event, or
	// NoSeq when that allocation was not recorded.
	AllocSeq uint64 `json:"alloc_seq,omitempty"`
	// Op is the op that asked for the allocation (AllocOp), or a mark's
	// label.
	Op string `json:"op,omitempty"`
	// Segment and SegmentSize are, for a reservation or release, the
	// address range of the segment concerned: the same as Addr and Size
	// for a whole segment, the reserved address range of an expandable
	// segment whose pages were mapped or unmapped. Small is true for the
	// small pool's segments.
	Segment     uintptr `json:"segment,omitempty"`
	SegmentSize int64   `json:"segment_size,omitempty"`
	Small       bool    `json:"small,omitempty"`
}

// NoSeq is Event.AllocSeq for a free whose allocation was not recorded.
const NoSeq = ^uint64(0)

// TierState is what a History knows of one tier before its first event:
// the bytes of live blocks per role and the reserved bytes.
type TierState struct {
	Allocated [NumRoles]int64 `json:"allocated_by_role"`
	Requested [NumRoles]int64 `json:"requested_by_role"`
	Reserved  int64           `json:"reserved"`
}

// History is a copy of the allocation history recorded so far: every
// alloc, free, reservation, release and mark still in the recorder's ring,
// oldest first, and the state of every tier just before the first of them,
// so that byte counts can be followed from there.
type History struct {
	// Start is the wall-clock time of Event.Time 0.
	Start time.Time `json:"start"`
	// Backends names each tier's backend ("" for tiers without one).
	Backends [NumTiers]string `json:"backends"`
	// Before is the state of each tier before Events[0].
	Before [NumTiers]TierState `json:"before"`
	// Dropped counts the events of this recording overwritten in the
	// ring before the copy was made; for a window of a history
	// (memviz.Window, WindowTime), those of the window: the history's
	// for a window from its start, 0 for one from a later event.
	Dropped uint64 `json:"dropped"`
	// Capacity is the events the ring holds: RecordHistory's capacity,
	// DefaultHistoryCapacity for 0, or the clamped size of one too large
	// (MaxHistoryCapacity).
	Capacity int     `json:"capacity"`
	Events   []Event `json:"events"`
}

// DefaultHistoryCapacity is the ring size RecordHistory uses for 0 or
// less: at about 100 bytes an event, at most some 13 MiB once full, which
// holds many training steps of a GPT-2 (a few thousand allocations each).
const DefaultHistoryCapacity = 1 << 17

// MaxHistoryCapacity is the largest ring RecordHistory makes: some 1.6
// GiB of events once full. A larger capacity is clamped to it, and to
// what fits in an eighth of the memory this process may use (the
// machine's RAM or its cgroup's limit, when they can be read), so that
// no capacity can exhaust the host; History.Capacity reports the ring
// size used.
const MaxHistoryCapacity = 1 << 24

// historyMemoryShare is the share of the host memory (1/historyMemoryShare)
// a full history ring may take at most.
const historyMemoryShare = 8

// historyFirstRing is the events the ring holds before it first grows.
const historyFirstRing = 256

// historyCapacity is the ring size for a RecordHistory(capacity):
// DefaultHistoryCapacity for 0 or less, else capacity clamped to
// MaxHistoryCapacity and to a historyMemoryShare of the host's memory.
func historyCapacity(capacity int) uint64 {
	if capacity <= 0 {
		return DefaultHistoryCapacity
	}
	c := uint64(min(capacity, MaxHistoryCapacity))
	if c > DefaultHistoryCapacity {
		if limit, _ := hostMemoryLimit(); limit > 0 {
			fit := uint64(limit) / historyMemoryShare / uint64(unsafe.Sizeof(Event{}))
			c = max(min(c, fit), DefaultHistoryCapacity)
		}
	}
	return c
}

// recorder is the ring of an allocation history. Its pools call it with
// their mutex held, and only when it is on: a pool's hist field is nil
// otherwise, and recording costs one branch per Alloc and Free.
//
// The ring grows as events come, doubling up to its capacity, so that a
// large capacity costs memory only once that many events were recorded:
// the event of Seq seq is at ring[(seq-first)%capacity], and pos is the
// slot of the next one.
type recorder struct {
	start    time.Time
	ring     []Event // len(ring) <= capacity; == capacity once it wrapped
	capacity uint64
	pos      int    // ring index of the next event: (n-first) % capacity
	n        uint64 // Seq of the next event
	first    uint64 // Seq of the recording's first event
	past     ringState
}

// ringState is what the events before the oldest one in the ring did:
// each tier's state before it, and how many events of each tier (marks
// last) the ring dropped.
type ringState struct {
	before  [NumTiers]TierState
	dropped [NumTiers + 1]uint64
}

// apply adds e's effect to s (sign 1: e leaves the ring), or takes it
// off (sign -1: s goes back to before e).
func (s *ringState) apply(e *Event, sign int64) {
	if e.Kind == EventMark {
		s.dropped[NumTiers] += uint64(sign)
		return
	}
	s.dropped[e.Tier] += uint64(sign)
	t := &s.before[e.Tier]
	switch e.Kind {
	case EventAlloc:
		t.Allocated[e.Role] += sign * e.Block
		t.Requested[e.Role] += sign * e.Size
	case EventFree:
		t.Allocated[e.Role] -= sign * e.Block
		t.Requested[e.Role] -= sign * e.Size
	case EventReserve:
		t.Reserved += sign * e.Size
	case EventRelease:
		t.Reserved -= sign * e.Size
	}
}

// oldest is the Seq of the oldest event in the ring (r.n when empty).
func (r *recorder) oldest() uint64 { return r.n - min(r.n-r.first, r.capacity) }

func newRecorder(capacity int, nextSeq uint64) *recorder {
	c := historyCapacity(capacity)
	return &recorder{start: time.Now(), ring: make([]Event, min(c, historyFirstRing)), capacity: c, n: nextSeq, first: nextSeq}
}

// at is the ring slot of the event of Seq seq, which must be in the ring.
func (r *recorder) at(seq uint64) *Event { return &r.ring[(seq-r.first)%r.capacity] }

// grow doubles the ring (up to its capacity) once its events fill it,
// before the ring wraps: the events are at the start, in order.
func (r *recorder) grow() {
	ring := make([]Event, min(2*uint64(len(r.ring)), r.capacity))
	copy(ring, r.ring)
	r.ring = ring
}

// add returns the ring slot of a new event, stamped with its Seq and time.
// An event it overwrites moves into the past state.
func (r *recorder) add(k EventKind, t Tier) *Event {
	if r.pos == len(r.ring) { // full before wrapping: it grows (amortised)
		r.grow()
	}
	e := &r.ring[r.pos]
	if r.n-r.first >= r.capacity {
		r.past.apply(e, 1) // the event it overwrites leaves the ring
	}
	*e = Event{Seq: r.n, Time: int64(time.Since(r.start)), Kind: k, Tier: t}
	r.n++
	if r.pos++; uint64(r.pos) == r.capacity {
		r.pos = 0
	}
	return e
}

// alloc records b being handed out for size bytes, and stamps b with the
// event's Seq so that its free can name it.
func (r *recorder) alloc(t Tier, b *Block, size int64, op string) {
	e := r.add(EventAlloc, t)
	e.Role, e.Stream, e.Addr, e.Size, e.Block, e.Op = b.role, b.seg.stream, b.addr, size, b.size, op
	b.hist = uint32(e.Seq%histMod) + 1 // 0 marks a block allocated while no one recorded
}

// free records b, still live with its requested bytes, being freed.
func (r *recorder) free(t Tier, b *Block) {
	allocSeq := r.allocSeq(t, b)
	var op string
	if allocSeq != NoSeq { // read before add: in a full ring the free may take its slot
		op = r.at(allocSeq).Op
	}
	e := r.add(EventFree, t)
	e.Role, e.Stream, e.Addr, e.Size, e.Block, e.AllocSeq, e.Op = b.role, b.seg.stream, b.addr, b.requested, b.size, allocSeq, op
}

// histMod is the modulus of a block's hist stamp (Seq mod histMod, plus
// one): 2^32-1, so that the stamp never wraps to 0, which marks a block
// allocated while no one recorded. A ring never holds histMod events.
const histMod = 1<<32 - 1

// allocSeq finds the Seq of the event that allocated the live block b:
// b.hist holds its Seq mod histMod, plus one. The event must still be in the
// ring and describe b, else it is NoSeq.
func (r *recorder) allocSeq(t Tier, b *Block) uint64 {
	if b.hist == 0 {
		return NoSeq
	}
	back := (r.n%histMod + histMod - uint64(b.hist-1)) % histMod // events since, mod histMod
	if back == 0 || back > r.n-r.first || back > r.capacity {
		return NoSeq
	}
	seq := r.n - back
	e := r.at(seq)
	if e.Seq != seq || e.Kind != EventAlloc || e.Tier != t || e.Addr != b.addr || e.Block != b.size {
		return NoSeq
	}
	return seq
}

// segment records size bytes at addr of seg reserved (or released) from a
// backend.
func (r *recorder) segment(k EventKind, t Tier, seg *segment, addr uintptr, size int64) {
	e := r.add(k, t)
	e.Stream, e.Addr, e.Size = seg.stream, addr, size
	e.Segment, e.SegmentSize, e.Small = seg.region.Addr, seg.region.Size, seg.small
}

// startState is the state of every tier of pools when recording starts:
// their live blocks per role (read from the blocks) and reserved bytes.
func startState(pools []*Pool) [NumTiers]TierState {
	var st [NumTiers]TierState
	for _, p := range pools {
		if p == nil {
			continue
		}
		s := &st[p.tier]
		s.Reserved += p.sinks.own.Reserved.Current
		for seg := p.segs; seg != nil; seg = seg.next {
			for b := seg.first; b != nil; b = b.next {
				if b.state == blockLive {
					s.Allocated[b.role] += b.size
					s.Requested[b.role] += b.requested
				}
			}
		}
	}
	return st
}

// RecordHistory starts recording every allocation, free, reservation and
// release of the manager's pools, and MarkHistory's marks, in a ring of
// capacity events (DefaultHistoryCapacity when capacity <= 0); once full,
// the oldest events make room. The ring takes memory as events come (it
// grows by doubling, about 100 bytes an event), not all at once; a
// capacity past MaxHistoryCapacity, or past what fits in an eighth of the
// host's memory, is clamped to it (History.Capacity says to what). A
// recording already on is replaced (its events dropped). Recording costs
// about a clock read and a 100-byte write per call
// (BenchmarkManagerPairHistory); off, one branch.
func (m *Manager) RecordHistory(capacity int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := newRecorder(capacity, m.nextSeq())
	r.past.before = startState(m.pools[:])
	m.setRecorder(r)
}

// StopHistory stops recording; History still returns what was recorded.
func (m *Manager) StopHistory() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.hist != nil {
		m.lastHist = m.hist
	}
	m.setRecorder(nil)
}

// nextSeq is the Seq the next recording starts from: Seqs never repeat, so
// a block stamped by an earlier recording is never mistaken for one of the
// current one (its Seq lies before the recording's first).
func (m *Manager) nextSeq() uint64 {
	for _, r := range []*recorder{m.hist, m.lastHist} {
		if r != nil {
			return r.n
		}
	}
	return 0
}

func (m *Manager) setRecorder(r *recorder) {
	m.hist = r
	for _, p := range m.pools {
		if p != nil {
			p.hist = r
			if r != nil { // StopHistory's nil leaves the recording to read
				p.recorded = r
			}
		}
	}
}

// MarkHistory adds a mark with label to the history being recorded (a
// training step's start, say); without a recording it does nothing.
func (m *Manager) MarkHistory(label string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.hist != nil {
		m.hist.add(EventMark, 0).Op = label
	}
}

// History returns a copy of the history recorded by the current
// recording, or the last one after StopHistory; nil when there was none.
// The copy is the history as it was when History was called. It takes
// the manager's lock a few thousand events at a time (history_copy.go),
// so that allocations go on while a large ring is copied; the oldest
// events that they overwrite before their turn to be copied are left
// out (counted in Dropped, and folded into Before).
func (m *Manager) History() *History {
	m.mu.Lock()
	r := m.hist
	if r == nil {
		r = m.lastHist
	}
	names := m.backendNames()
	m.mu.Unlock()
	if r == nil {
		return nil
	}
	events, past := r.copyRing(&m.mu)
	return r.history(names, events, past)
}

// backendNames names each tier's backend.
func (m *Manager) backendNames() [NumTiers]string {
	var names [NumTiers]string
	for t, p := range m.pools {
		if p != nil {
			names[t] = p.name
		}
	}
	return names
}
