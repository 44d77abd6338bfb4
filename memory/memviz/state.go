package memviz

import (
	"fmt"

	"github.com/strata-ml/strata/memory"
)

// tierState is one tier's bytes while a history is replayed.
type tierState struct {
	allocated [memory.NumRoles]int64 // rounded bytes of live blocks, per role
	reserved  int64
}

func (s *tierState) total() int64 {
	var t int64
	for _, b := range s.allocated {
		t += b
	}
	return t
}

// replayer follows a history's byte counts from its Before state.
type replayer struct {
	tiers [memory.NumTiers]tierState
}

func newReplayer(h *memory.History) *replayer {
	r := &replayer{}
	for t := range memory.NumTiers {
		r.tiers[t].allocated = h.Before[t].Allocated
		r.tiers[t].reserved = h.Before[t].Reserved
	}
	return r
}

// apply moves the counts by one event; it skips an event of a tier or
// role that does not exist (which checkHistory refuses).
func (r *replayer) apply(e *memory.Event) {
	if !validEvent(e) {
		return
	}
	s := &r.tiers[e.Tier]
	switch e.Kind {
	case memory.EventAlloc:
		s.allocated[e.Role] += e.Block
	case memory.EventFree:
		s.allocated[e.Role] -= e.Block
	case memory.EventReserve:
		s.reserved += e.Size
	case memory.EventRelease:
		s.reserved -= e.Size
	}
}

// movedReleases marks the events that release memory the events right
// after them map again in the same tier: pages an expandable segment moves
// from a free block to where a request needs them (pool_expand.go). The
// pictures skip the moment between, when the pages are counted nowhere.
// Event i is such a release when it releases bytes and the first later
// event of its tier that is neither a mark nor a release (several ranges
// are moved before the mapping) reserves bytes. One backward pass keeps,
// for every tier, whether that next event reserves bytes, so that a long
// history costs one step per event; a forward scan from each release cost
// (releases x events) when a tier released and then went quiet while the
// others recorded on.
func movedReleases(evs []memory.Event) []bool {
	out := make([]bool, len(evs))
	// remaps[t]: the next event of tier t, neither a mark nor a release,
	// reserves bytes. Indexed by every Tier value, known or not.
	var remaps [1 << 8]bool
	for i := len(evs) - 1; i >= 0; i-- {
		switch e := &evs[i]; e.Kind {
		case memory.EventMark:
		case memory.EventRelease:
			out[i] = e.Size != 0 && remaps[e.Tier]
		default:
			remaps[e.Tier] = e.Kind == memory.EventReserve && e.Size > 0
		}
	}
	return out
}

// Window returns the part of h from the first mark labelled from up to
// the first later mark labelled to (both included); "" for from means
// the start of the history, "" for to its end. The result's Before state
// is the state at the window's start, so it replays on its own. It is an
// error when a named mark is missing. Its Dropped counts the events of
// the window that the ring lost: h's for a window from the start of the
// history, 0 for one from a mark (the events after a kept one are kept).
func Window(h *memory.History, from, to string) (*memory.History, error) {
	if err := checkHistory("Window", h); err != nil {
		return nil, err
	}
	lo, hi := 0, len(h.Events)
	if from != "" {
		lo = findMark(h.Events, 0, from)
		if lo < 0 {
			return nil, fmt.Errorf("memviz: no mark %q in the history", from)
		}
	}
	if to != "" {
		start := 0 // with from "", a first event marked to ends the window
		if from != "" {
			start = lo + 1
		}
		i := findMark(h.Events, start, to)
		if i < 0 {
			return nil, fmt.Errorf("memviz: no mark %q after %q in the history", to, from)
		}
		hi = i + 1
	}
	var dropped uint64
	if from == "" {
		dropped = h.Dropped
	}
	return slice(h, lo, hi, dropped), nil
}

// WindowTime returns the part of h with from <= Event.Time < to (ns since
// History.Start); to <= 0 means the end. A nil h gives nil, which the
// writers refuse. Its Dropped is h's when it starts at h's first event
// (the events the ring lost came before it, at times the history no
// longer has: at most that many of them fall in the window), else 0.
func WindowTime(h *memory.History, from, to int64) *memory.History {
	if h == nil {
		return nil
	}
	lo, hi := 0, len(h.Events)
	for lo < hi && h.Events[lo].Time < from {
		lo++
	}
	if to > 0 {
		for i := lo; i < len(h.Events); i++ {
			if h.Events[i].Time >= to {
				hi = i
				break
			}
		}
	}
	var dropped uint64
	if lo == 0 {
		dropped = h.Dropped
	}
	return slice(h, lo, hi, dropped)
}

func findMark(evs []memory.Event, start int, label string) int {
	for i := start; i < len(evs); i++ {
		if evs[i].Kind == memory.EventMark && evs[i].Op == label {
			return i
		}
	}
	return -1
}

// slice is h's events [lo, hi) with the Before state of event lo, and
// dropped events lost within it.
func slice(h *memory.History, lo, hi int, dropped uint64) *memory.History {
	out := *h
	out.Dropped = dropped
	r := newReplayer(h)
	before := h.Before
	for i := range h.Events[:lo] {
		e := &h.Events[i]
		if !validEvent(e) {
			continue
		}
		r.apply(e)
		s := &before[e.Tier]
		switch e.Kind {
		case memory.EventAlloc:
			s.Requested[e.Role] += e.Size
		case memory.EventFree:
			s.Requested[e.Role] -= e.Size
		}
	}
	for t := range memory.NumTiers {
		before[t].Allocated = r.tiers[t].allocated
		before[t].Reserved = r.tiers[t].reserved
	}
	out.Before = before
	out.Events = h.Events[lo:hi]
	return &out
}

// usedTiers lists the tiers a history touches or that hold bytes before it.
func usedTiers(h *memory.History) []memory.Tier {
	var used [memory.NumTiers]bool
	for t := range memory.NumTiers {
		s := &h.Before[t]
		used[t] = s.Reserved != 0
		for _, b := range s.Allocated {
			used[t] = used[t] || b != 0
		}
	}
	for i := range h.Events {
		if e := &h.Events[i]; e.Kind != memory.EventMark {
			used[e.Tier] = true
		}
	}
	var out []memory.Tier
	for t, u := range used {
		if u {
			out = append(out, memory.Tier(t))
		}
	}
	return out
}
