package memviz

import (
	"bufio"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"

	"github.com/strata-ml/strata/memory"
)

// TraceOptions tunes WriteChromeTrace.
type TraceOptions struct {
	// Largest is how many allocations become slices: the largest by
	// rounded size; 0 means 200, negative none.
	Largest int
}

// traceEvent is one entry of the Chrome trace-event format ("JSON object
// format", as Perfetto and chrome://tracing read it).
type traceEvent struct {
	Name string         `json:"name"`
	Cat  string         `json:"cat,omitempty"`
	Ph   string         `json:"ph"`
	Ts   float64        `json:"ts"` // microseconds
	Dur  *float64       `json:"dur,omitempty"`
	Pid  int            `json:"pid"`
	Tid  int            `json:"tid"`
	S    string         `json:"s,omitempty"`
	Args map[string]any `json:"args,omitempty"`
}

type traceFile struct {
	TraceEvents     []traceEvent   `json:"traceEvents"`
	DisplayTimeUnit string         `json:"displayTimeUnit"`
	OtherData       map[string]any `json:"otherData,omitempty"`
}

// Process and thread ids: tier t is process t+1; thread 0 holds its
// counters and instant events, threads 1, 2, ... its slices.
func pidOf(t memory.Tier) int { return int(t) + 1 }

const marksPid = 100 // marks live in a process of their own

func micros(ns int64) float64 { return float64(ns) / 1000 }

// WriteChromeTrace writes h as a Chrome trace-event JSON file (see the
// package doc for what it shows).
func WriteChromeTrace(w io.Writer, h *memory.History, o TraceOptions) error {
	if err := errors.Join(checkWriter("WriteChromeTrace", w), checkHistory("WriteChromeTrace", h)); err != nil {
		return err
	}
	if o.Largest == 0 {
		o.Largest = 200
	}
	tf := traceFile{TraceEvents: []traceEvent{}, DisplayTimeUnit: "ns", OtherData: map[string]any{
		"producer": "strata memory/memviz", "start": h.Start, "dropped_events": h.Dropped}}
	meta := func(pid, tid int, kind, name string) {
		tf.TraceEvents = append(tf.TraceEvents, traceEvent{Name: kind, Ph: "M", Pid: pid, Tid: tid, Args: map[string]any{"name": name}})
	}
	tiers := usedTiers(h)
	for _, t := range tiers {
		name := "memory: " + t.String()
		if b := h.Backends[t]; b != "" {
			name += " (" + b + ")"
		}
		meta(pidOf(t), 0, "process_name", name)
		tf.TraceEvents = append(tf.TraceEvents, traceEvent{Name: "process_sort_index", Ph: "M", Pid: pidOf(t), Args: map[string]any{"sort_index": int(t)}})
		meta(pidOf(t), 0, "thread_name", "segments")
	}
	var body []traceEvent
	body = appendCounters(body, h, tiers)
	slicesEv, lanes := largestSlices(h, o.Largest)
	body = append(body, slicesEv...)
	for t, n := range lanes {
		for l := range n {
			meta(pidOf(memory.Tier(t)), l+1, "thread_name", fmt.Sprintf("largest allocations %d", l+1))
		}
	}
	hasMarks := false
	for i := range h.Events {
		e := &h.Events[i]
		switch e.Kind {
		case memory.EventReserve, memory.EventRelease:
			body = append(body, traceEvent{Name: e.Kind.String() + " " + memory.FormatBytes(e.Size), Cat: "segment", Ph: "i", S: "t",
				Ts: micros(e.Time), Pid: pidOf(e.Tier), Tid: 0,
				Args: map[string]any{"addr": fmt.Sprintf("%#x", e.Addr), "bytes": e.Size, "stream": uint64(e.Stream)}})
		case memory.EventMark:
			hasMarks = true
			body = append(body, traceEvent{Name: e.Op, Cat: "mark", Ph: "i", S: "g", Ts: micros(e.Time), Pid: marksPid, Tid: 0})
		}
	}
	if hasMarks {
		meta(marksPid, 0, "process_name", "marks")
	}
	// One time order for every track: counters, slices and instants are
	// each in order already; a stable sort keeps ties as written.
	slices.SortStableFunc(body, func(a, b traceEvent) int { return cmp.Compare(a.Ts, b.Ts) })
	tf.TraceEvents = append(tf.TraceEvents, body...)
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	if err := enc.Encode(tf); err != nil {
		return fmt.Errorf("memviz: writing the Chrome trace: %w", err)
	}
	return bw.Flush()
}

// appendCounters adds, per tier, counter events of allocated and reserved
// bytes and of allocated bytes per role, one whenever a value changes,
// starting with the state before the first event.
func appendCounters(out []traceEvent, h *memory.History, tiers []memory.Tier) []traceEvent {
	r := newReplayer(h)
	moved := movedReleases(h.Events)
	var t0 int64
	if len(h.Events) > 0 {
		t0 = h.Events[0].Time
	}
	roleArgs := func(s *tierState) map[string]any {
		a := make(map[string]any, memory.NumRoles)
		for ro, b := range s.allocated {
			a[memory.Role(ro).String()] = b
		}
		return a
	}
	emit := func(t memory.Tier, ts int64, allocated, reserved, roles bool) {
		s := &r.tiers[t]
		pid := pidOf(t)
		if allocated {
			out = append(out, traceEvent{Name: "allocated", Ph: "C", Ts: micros(ts), Pid: pid, Args: map[string]any{"bytes": s.total()}})
			if roles {
				out = append(out, traceEvent{Name: "allocated by role", Ph: "C", Ts: micros(ts), Pid: pid, Args: roleArgs(s)})
			}
		}
		if reserved {
			out = append(out, traceEvent{Name: "reserved", Ph: "C", Ts: micros(ts), Pid: pid, Args: map[string]any{"bytes": s.reserved}})
		}
	}
	for _, t := range tiers {
		emit(t, t0, true, true, true)
	}
	for i := range h.Events {
		e := &h.Events[i]
		r.apply(e)
		switch e.Kind {
		case memory.EventAlloc, memory.EventFree:
			emit(e.Tier, e.Time, true, false, true)
		case memory.EventReserve, memory.EventRelease:
			if !moved[i] {
				emit(e.Tier, e.Time, false, true, false)
			}
		}
	}
	return out
}

// span is one allocation's life within a history.
type span struct {
	alloc      *memory.Event // nil when allocated before the history
	free       *memory.Event // nil when live at its end
	start, end int64
	tier       memory.Tier
	block      int64
}

// spans pairs every allocation of h with its free. Allocations live at the
// end last until the last event; frees of allocations made before the
// history start at the first event.
func spans(h *memory.History) []span {
	if len(h.Events) == 0 {
		return nil
	}
	t0, t1 := h.Events[0].Time, h.Events[len(h.Events)-1].Time
	first := h.Events[0].Seq
	open := map[uint64]int{}
	var out []span
	for i := range h.Events {
		e := &h.Events[i]
		switch e.Kind {
		case memory.EventAlloc:
			open[e.Seq] = len(out)
			out = append(out, span{alloc: e, start: e.Time, end: t1, tier: e.Tier, block: e.Block})
		case memory.EventFree:
			if j, ok := open[e.AllocSeq]; ok && e.AllocSeq >= first {
				out[j].free, out[j].end = e, e.Time
				delete(open, e.AllocSeq)
				continue
			}
			out = append(out, span{free: e, start: t0, end: e.Time, tier: e.Tier, block: e.Block})
		}
	}
	return out
}

// largestSlices returns complete ("X") events for the n largest
// allocations, on lanes (threads) per tier where no two overlap, and the
// number of lanes of each tier.
func largestSlices(h *memory.History, n int) ([]traceEvent, [memory.NumTiers]int) {
	var lanesUsed [memory.NumTiers]int
	if n < 0 {
		return nil, lanesUsed
	}
	all := spans(h)
	slices.SortStableFunc(all, func(a, b span) int {
		if c := cmp.Compare(b.block, a.block); c != 0 {
			return c
		}
		return cmp.Compare(b.end-b.start, a.end-a.start)
	})
	all = all[:min(n, len(all))]
	slices.SortStableFunc(all, func(a, b span) int { return cmp.Compare(a.start, b.start) })
	var laneEnd [memory.NumTiers][]int64
	var out []traceEvent
	for _, s := range all {
		ends := laneEnd[s.tier]
		lane := slices.IndexFunc(ends, func(end int64) bool { return end <= s.start })
		if lane < 0 {
			lane = len(ends)
			ends = append(ends, 0)
		}
		ends[lane] = s.end
		laneEnd[s.tier] = ends
		e := s.alloc
		if e == nil {
			e = s.free
		}
		op := e.Op
		if op == "" {
			op = e.Role.String()
		}
		// The slice ends at micros(s.end) exactly, where the next slice on
		// its lane may start: ts+dur in floating point must not pass it
		// (micros(100)+micros(200) > micros(300), an overlap that does not
		// nest).
		ts, end := micros(s.start), micros(s.end)
		dur := end - ts
		for dur > 0 && ts+dur > end {
			dur = math.Nextafter(dur, 0)
		}
		args := map[string]any{"bytes": e.Size, "block": e.Block, "role": e.Role.String(), "addr": fmt.Sprintf("%#x", e.Addr),
			"stream": uint64(e.Stream), "allocated_before_history": s.alloc == nil, "live_at_end": s.free == nil}
		if e.Op != "" {
			args["op"] = e.Op
		}
		out = append(out, traceEvent{Name: op + " " + memory.FormatBytes(e.Size), Cat: e.Role.String(), Ph: "X",
			Ts: ts, Dur: &dur, Pid: pidOf(s.tier), Tid: lane + 1, Args: args})
	}
	for t := range laneEnd {
		lanesUsed[t] = len(laneEnd[t])
	}
	return out, lanesUsed
}
