package main

import (
	"bufio"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/strata-ml/strata/memory"
)

// traceEvent is one line of a PyTorch allocation trace (the CSV written
// from torch.cuda.memory._snapshot()'s device traces): columns action,
// addr, size, stream.
type traceEvent struct {
	action string
	addr   uint64
	size   int64
	stream uint64
}

// Trace actions, every one PyTorch's recorder writes (TraceEntry in
// CUDACachingAllocator.h). free_requested is when a tensor dies;
// free_completed when its block is back in the pool (after any stream
// events): the replay frees at free_completed, as PyTorch's pool does.
// Classic segments come and go whole (segment_alloc, segment_free);
// expandable ones (expandable_segments:True) map and unmap pages
// (segment_map, segment_unmap). snapshot marks a call to _snapshot(), oom
// an allocation PyTorch failed (PyTorch names its addr device_free: the
// device's free bytes; size is the request) and user_defined an
// annotation of newer versions: none changes what the replay does.
const (
	actAlloc         = "alloc"
	actFreeRequested = "free_requested"
	actFreeCompleted = "free_completed"
	actSegmentAlloc  = "segment_alloc"
	actSegmentFree   = "segment_free"
	actSegmentMap    = "segment_map"
	actSegmentUnmap  = "segment_unmap"
	actSnapshot      = "snapshot"
	actOOM           = "oom"
	actUserDefined   = "user_defined"
)

// traceColumns are the columns a trace must have, found by name in its
// header: other columns (PyTorch's entries also hold time_us, frames and
// more) are ignored.
var traceColumns = [4]string{"action", "addr", "size", "stream"}

// readTrace parses a trace file; errors name the file and the line. The
// header names the columns, in any order, extra ones ignored; a UTF-8
// byte order mark, CRLF line ends, spaces around fields and empty lines
// are allowed. The address of an event that has none (oom, snapshot,
// user_defined) may be empty. A stream is PyTorch's int64 of the
// cudaStream_t: a negative one is taken modulo 2^64.
func readTrace(path string) ([]traceEvent, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	br := bufio.NewReader(f)
	if bom, err := br.Peek(3); err == nil && string(bom) == "\ufeff" {
		br.Discard(3)
	}
	r := csv.NewReader(br)
	r.ReuseRecord = true
	head, err := r.Read()
	if err != nil {
		return nil, fmt.Errorf("%s: reading the header: %w", path, err)
	}
	var col [4]int // the index of each of traceColumns in a record
	for i, name := range traceColumns {
		col[i] = -1
		for j, h := range head {
			if strings.TrimSpace(h) != name {
				continue
			}
			if col[i] >= 0 {
				return nil, fmt.Errorf("%s: header %q has column %q twice", path, head, name)
			}
			col[i] = j
		}
		if col[i] < 0 {
			return nil, fmt.Errorf("%s: header is %q, want the columns %q (in any order, others ignored)", path, head, traceColumns)
		}
	}
	r.FieldsPerRecord = len(head)
	var evs []traceEvent
	for {
		rec, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		line, _ := r.FieldPos(0)
		field := func(i int) string { return strings.TrimSpace(rec[col[i]]) }
		action, addr, size, stream := field(0), field(1), field(2), field(3)
		var ev traceEvent
		// A snapshot's addr and size are 0, and an oom's size may be.
		minSize := int64(1)
		switch action {
		// The constants, not the field: it would keep the whole line.
		case actAlloc, actFreeRequested, actFreeCompleted, actSegmentAlloc, actSegmentFree, actSegmentMap, actSegmentUnmap:
			ev.action = actionNames[action]
		case actSnapshot, actOOM, actUserDefined:
			ev.action, minSize = actionNames[action], 0
			if addr == "" {
				addr = "0" // not an address: PyTorch writes none for an oom
			}
		default:
			return nil, fmt.Errorf("%s:%d: unknown action %q", path, line, action)
		}
		if ev.addr, err = strconv.ParseUint(addr, 10, 64); err != nil {
			return nil, fmt.Errorf("%s:%d: address %q: %w", path, line, addr, err)
		}
		if ev.size, err = strconv.ParseInt(size, 10, 64); err != nil || ev.size < minSize {
			what := "a positive integer"
			if minSize == 0 {
				what = "a non-negative integer"
			}
			return nil, fmt.Errorf("%s:%d: size %q of %s must be %s", path, line, size, ev.action, what)
		}
		if minSize > 0 && ev.addr+uint64(ev.size) < ev.addr {
			return nil, fmt.Errorf("%s:%d: %s at %#x of %d bytes runs past the end of the address space", path, line, ev.action, ev.addr, ev.size)
		}
		if ev.stream, err = strconv.ParseUint(stream, 10, 64); err != nil {
			s, err2 := strconv.ParseInt(stream, 10, 64)
			if err2 != nil {
				return nil, fmt.Errorf("%s:%d: stream %q: %w", path, line, stream, err)
			}
			ev.stream = uint64(s)
		}
		evs = append(evs, ev)
	}
	if len(evs) == 0 {
		return nil, fmt.Errorf("%s: no events", path)
	}
	return evs, nil
}

// actionNames maps each action to its constant.
var actionNames = map[string]string{}

func init() {
	for _, a := range []string{actAlloc, actFreeRequested, actFreeCompleted, actSegmentAlloc, actSegmentFree,
		actSegmentMap, actSegmentUnmap, actSnapshot, actOOM, actUserDefined} {
		actionNames[a] = a
	}
}

// traceResult compares PyTorch's caching allocator, as the trace recorded
// it, with our pool replaying the same requests.
type traceResult struct {
	File   string `json:"file"`
	Events int    `json:"events"`
	Allocs int    `json:"allocs"`
	// Frees of blocks allocated before the trace began: not replayed.
	UnmatchedFrees int `json:"unmatched_frees"`
	// LiveAtEnd is blocks still allocated when the trace ends.
	LiveAtEnd int `json:"live_at_end"`
	// TorchOOMs counts the allocations PyTorch failed in the trace (oom
	// events); the replay serves every allocation the trace shows made.
	TorchOOMs int `json:"torch_ooms,omitempty"`

	// PeakRequested is the most bytes requested at once (the sum of live
	// allocation sizes, the trace's own measure), the same for both.
	PeakRequested int64 `json:"peak_requested_bytes"`

	// TorchPeakReserved is the peak of the bytes in segments the trace
	// shows PyTorch reserving (segment_alloc and segment_map minus
	// segment_free and segment_unmap): the bytes of the union of the
	// ranges reserved in the trace and not yet freed, so a range reserved
	// twice counts once and a free of a segment reserved before the trace
	// began takes nothing off.
	TorchPeakReserved int64   `json:"torch_peak_reserved_bytes"`
	TorchRatio        float64 `json:"torch_reserved_over_requested"`
	// TorchPreexistingPeak is the most bytes live at once in blocks that
	// lie in no segment the trace reserved: PyTorch served them from
	// segments it held before the trace began, which TorchPeakReserved
	// does not count. Those segments are never freed in the trace, so they
	// were held at TorchPeakReserved's moment too, and
	// TorchPeakReservedLowerBound (the sum) is a lower bound of PyTorch's
	// true peak; without a free of such a segment it is sound, else it is
	// reported as -1.
	TorchPreexistingPeak        int64   `json:"torch_preexisting_live_peak_bytes"`
	TorchPeakReservedLowerBound int64   `json:"torch_peak_reserved_lower_bound_bytes"`
	TorchRatioLowerBound        float64 `json:"torch_reserved_lower_bound_over_requested"`

	// Scale is -scale when not 1: every allocation was that many times as
	// large as in the trace (PeakRequested too; PyTorch's figures are the
	// trace's as recorded).
	Scale float64 `json:"scale,omitempty"`
	// Classic and Expandable are our pool's replays, with classic
	// segments and with expandable ones (memory.PoolConfig.Expandable);
	// nil, and left out of the JSON, for a mode not replayed (-segments,
	// or no virtual memory for expandable segments).
	Classic    *poolResult `json:"classic,omitempty"`
	Expandable *poolResult `json:"expandable,omitempty"`
}

// poolResult is one replay of a trace through our pool.
type poolResult struct {
	Mode          string  `json:"mode"`
	PeakAllocated int64   `json:"peak_allocated_bytes"`
	PeakReserved  int64   `json:"peak_reserved_bytes"`
	Ratio         float64 `json:"reserved_over_requested"`
	// Fragmentation is GMLake's measure, 1 - peak active / peak reserved.
	Fragmentation float64 `json:"fragmentation"`
	// NsPerCall is the time of the replay's pool calls (allocations and
	// frees) over their number, backend calls included.
	NsPerCall float64 `json:"ns_per_call"`
	Reps      int     `json:"reps"` // replays timed; NsPerCall is their median
	Calls     int     `json:"calls"`
	// Backend calls during the replay: regions or pages taken and given
	// back, and for expandable segments pages mapped and unmapped and
	// device synchronisations (before unmapping).
	BackendAllocs int64 `json:"backend_allocs"`
	BackendFrees  int64 `json:"backend_frees"`
	Maps          int64 `json:"maps,omitempty"`
	Unmaps        int64 `json:"unmaps,omitempty"`
	Syncs         int64 `json:"syncs,omitempty"`
}

// replay runs the trace's allocations and completed frees through a fresh
// pool over backend, with expandable segments (planning the steps when
// plan is set) or classic ones, and checks
// that its peak requested bytes are the trace's. The time per call is
// measured over the pool calls alone: scanTrace did the trace's
// bookkeeping before.
func replay(path string, res *traceResult, ops []poolOp, slots int, backend memory.Backend, expandable, plan bool) (poolResult, error) {
	out := poolResult{Mode: "classic", Calls: len(ops)}
	cfg := memory.PoolConfig{}
	if expandable {
		if _, ok := backend.(memory.VirtualMemory); !ok {
			return out, fmt.Errorf("%s: backend %s has no virtual memory API: no expandable segments", path, backend.Name())
		}
		cfg.Expandable, cfg.PlanSteps, out.Mode = true, plan, "expandable"
		if plan {
			out.Mode = "expandable, planned"
		}
	}
	p := memory.NewPool(backend, cfg)
	start := time.Now()
	blocks, ev, err := runOps(p, ops, slots)
	if err != nil {
		return out, errors.Join(fmt.Errorf("%s (%s): event %d: %w", path, out.Mode, ev+1, err), p.Close())
	}
	elapsed := time.Since(start)
	st := p.Stats()
	if st.Requested.Peak != res.PeakRequested {
		return out, errors.Join(fmt.Errorf("%s (%s): the pool's peak requested bytes %d differ from the trace's %d", path, out.Mode, st.Requested.Peak, res.PeakRequested), p.Close())
	}
	out.PeakAllocated = st.Allocated.Peak
	out.PeakReserved = st.Reserved.Peak
	out.BackendAllocs, out.BackendFrees = st.BackendAllocs, st.BackendFrees
	if expandable {
		out.Maps, out.Unmaps, out.Syncs = st.PagesMapped, st.PagesUnmapped, st.Syncs
	}
	out.NsPerCall = float64(elapsed.Nanoseconds()) / float64(max(len(ops), 1))
	if res.PeakRequested > 0 {
		out.Ratio = float64(out.PeakReserved) / float64(res.PeakRequested)
	}
	if st.Reserved.Peak > 0 {
		out.Fragmentation = 1 - float64(st.Active.Peak)/float64(st.Reserved.Peak)
	}
	for _, b := range blocks {
		if b == nil {
			continue
		}
		if err := p.Free(b); err != nil {
			return out, errors.Join(err, p.Close())
		}
	}
	return out, p.Close()
}

// poolOp is one pool call of a replay: an allocation of size bytes on
// stream into a slot of the block table, or the free of a slot's block.
// runOps replays ops on p, blocks kept in slots slots, and returns the
// blocks still live at the end; on an error, the trace event that failed.
func runOps(p *memory.Pool, ops []poolOp, slots int) (blocks []*memory.Block, event int, err error) {
	blocks = make([]*memory.Block, slots)
	for _, op := range ops {
		if op.free {
			err = p.Free(blocks[op.slot])
			blocks[op.slot] = nil
		} else {
			blocks[op.slot], err = p.Alloc(op.size, op.stream)
		}
		if err != nil {
			return blocks, op.event, err
		}
	}
	return blocks, 0, nil
}

type poolOp struct {
	event  int // index of the trace event, for errors
	slot   int
	free   bool
	size   int64
	stream memory.Stream
}

// scanTrace computes PyTorch's side of a trace from its events, and lists
// the pool calls replay makes for them, with the number of block slots
// they use (a freed block's slot is reused). An allocation at an address
// already live is an error.
func scanTrace(path string, evs []traceEvent) (res traceResult, ops []poolOp, slots int, err error) {
	res = traceResult{File: filepath.Base(path), Events: len(evs)}
	type liveBlock struct {
		slot    int
		size    int64
		outside bool // in no segment the trace reserved
	}
	live := map[uint64]liveBlock{}
	var freeSlots []int
	var requested, reserved, outsideLive int64
	var segs rangeSet // the memory the trace shows PyTorch reserving
	preexistingFreed := false
	for i, ev := range evs {
		switch ev.action {
		case actAlloc:
			if _, dup := live[ev.addr]; dup {
				return res, nil, 0, fmt.Errorf("%s: event %d allocates address %#x, which is live", path, i+1, ev.addr)
			}
			lb := liveBlock{slot: slots, size: ev.size, outside: !segs.contains(ev.addr)}
			if k := len(freeSlots); k > 0 {
				lb.slot, freeSlots = freeSlots[k-1], freeSlots[:k-1]
			} else {
				slots++
			}
			live[ev.addr] = lb
			ops = append(ops, poolOp{event: i, slot: lb.slot, size: ev.size, stream: memory.Stream(ev.stream)})
			requested += ev.size
			if lb.outside {
				outsideLive += ev.size
				res.TorchPreexistingPeak = max(res.TorchPreexistingPeak, outsideLive)
			}
			res.PeakRequested = max(res.PeakRequested, requested)
			res.Allocs++
		case actFreeCompleted:
			lb, ok := live[ev.addr]
			if !ok {
				res.UnmatchedFrees++
				continue
			}
			ops = append(ops, poolOp{event: i, slot: lb.slot, free: true})
			delete(live, ev.addr)
			freeSlots = append(freeSlots, lb.slot)
			requested -= lb.size
			if lb.outside {
				outsideLive -= lb.size
			}
		case actSegmentAlloc, actSegmentMap:
			// Bytes already in segs (a range the trace holds twice) count
			// once.
			reserved += segs.add(ev.addr, ev.size)
			res.TorchPeakReserved = max(res.TorchPeakReserved, reserved)
		case actSegmentFree, actSegmentUnmap:
			// Bytes reserved before the trace began were never counted:
			// only those the trace reserved are taken off.
			removed := segs.remove(ev.addr, ev.size)
			if removed < ev.size {
				preexistingFreed = true
			}
			reserved -= removed
		case actOOM:
			res.TorchOOMs++
		}
	}
	if res.Allocs == 0 {
		return res, nil, 0, fmt.Errorf("%s: no allocations to replay", path)
	}
	res.LiveAtEnd = len(live)
	res.TorchPeakReservedLowerBound = -1
	if !preexistingFreed {
		res.TorchPeakReservedLowerBound = res.TorchPeakReserved + res.TorchPreexistingPeak
	}
	if res.PeakRequested > 0 {
		res.TorchRatio = float64(res.TorchPeakReserved) / float64(res.PeakRequested)
		res.TorchRatioLowerBound = float64(res.TorchPeakReservedLowerBound) / float64(res.PeakRequested)
	}
	return res, ops, slots, nil
}
