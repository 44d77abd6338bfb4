package main

import (
	"bufio"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/strata-ml/strata/internal/atomicfile"
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
	line   int // its line in the trace file, for errors (0: not read from one)
}

// maxTraceSize is the largest allocation a replay makes: the largest
// request memory.Pool.Alloc takes (it refuses more as an invalid
// argument).
const maxTraceSize = 1<<62 - 1

// where names the event of index i, on line line of the trace at path (0:
// not read from a file), in an error: "path:line", else "path: event i+1".
func where(path string, i, line int) string {
	if line > 0 {
		return fmt.Sprintf("%s:%d", path, line)
	}
	return fmt.Sprintf("%s: event %d", path, i+1)
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
	f, err := openTrace(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	br := bufio.NewReader(&lineLimit{r: f, max: maxTraceLine})
	if bom, err := br.Peek(3); err == nil && string(bom) == "\ufeff" {
		br.Discard(3)
	}
	r := csv.NewReader(br)
	r.ReuseRecord = true
	r.FieldsPerRecord = -1 // checked below: a line of blanks is an empty line
	var head []string
	for {
		rec, err := r.Read()
		if long := (*longLineError)(nil); errors.As(err, &long) {
			return nil, fmt.Errorf("%s:%d: %w", path, long.line, err)
		}
		if err == io.EOF {
			return nil, fmt.Errorf("%s: no header line (an empty file, or empty lines only): want the columns %q", path, traceColumns)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: reading the header: %w", path, err)
		}
		if len(rec) > 1 || strings.TrimSpace(rec[0]) != "" {
			head = slices.Clone(rec) // ReuseRecord: the next Read overwrites rec
			break
		}
	}
	headLine, _ := r.FieldPos(0)
	var col [4]int // the index of each of traceColumns in a record
	for i, name := range traceColumns {
		col[i] = -1
		for j, h := range head {
			if strings.TrimSpace(h) != name {
				continue
			}
			if col[i] >= 0 {
				return nil, fmt.Errorf("%s:%d: header %s has column %q twice", path, headLine, quoted(head), name)
			}
			col[i] = j
		}
		if col[i] < 0 {
			return nil, fmt.Errorf("%s:%d: header is %s, want the columns %q (in any order, others ignored)", path, headLine, quoted(head), traceColumns)
		}
	}
	var evs []traceEvent
	for {
		rec, err := r.Read()
		if err == io.EOF {
			break
		}
		if long := (*longLineError)(nil); errors.As(err, &long) {
			return nil, fmt.Errorf("%s:%d: %w", path, long.line, err)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		line, _ := r.FieldPos(0)
		if len(rec) != len(head) {
			if len(rec) == 1 && strings.TrimSpace(rec[0]) == "" {
				continue
			}
			return nil, fmt.Errorf("%s:%d: %d fields, the header has %d", path, line, len(rec), len(head))
		}
		field := func(i int) string { return strings.TrimSpace(rec[col[i]]) }
		action, addr, size, stream := field(0), field(1), field(2), field(3)
		ev := traceEvent{line: line}
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
			return nil, fmt.Errorf("%s:%d: unknown action %s", path, line, quoted(action))
		}
		if ev.addr, err = strconv.ParseUint(addr, 10, 64); err != nil {
			return nil, fmt.Errorf("%s:%d: address %s: %w", path, line, quoted(addr), numError(err))
		}
		if ev.size, err = strconv.ParseInt(size, 10, 64); err != nil || ev.size < minSize {
			what := "a positive integer"
			if minSize == 0 {
				what = "a non-negative integer"
			}
			return nil, fmt.Errorf("%s:%d: size %s of %s must be %s", path, line, quoted(size), ev.action, what)
		}
		if minSize > 0 && ev.addr+uint64(ev.size) < ev.addr {
			return nil, fmt.Errorf("%s:%d: %s at %#x of %d bytes runs past the end of the address space", path, line, ev.action, ev.addr, ev.size)
		}
		if ev.stream, err = strconv.ParseUint(stream, 10, 64); err != nil {
			s, err2 := strconv.ParseInt(stream, 10, 64)
			if err2 != nil {
				return nil, fmt.Errorf("%s:%d: stream %s: %w", path, line, quoted(stream), numError(err))
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

// maxQuoted is the most of a field or a header readTrace quotes in an
// error: a line may be up to maxTraceLine bytes, and a binary file's
// would fill the terminal.
const maxQuoted = 100

// quoted is v as %q, cut after maxQuoted bytes.
func quoted(v any) string {
	s := fmt.Sprintf("%q", v)
	if len(s) <= maxQuoted {
		return s
	}
	return s[:maxQuoted] + "... (cut)"
}

// numError is err of strconv without the input it quotes (which the
// error gives, cut, before it).
func numError(err error) error {
	if ne, ok := err.(*strconv.NumError); ok {
		return ne.Err
	}
	return err
}

// openTrace opens a trace for readTrace: a test counts the opens through
// it, since a trace on a pipe or a FIFO can be read only once.
var openTrace = openTraceFile

// openTraceFile opens the trace at path: a regular file, or a pipe or a
// FIFO (-trace /dev/stdin, -trace <(zcat t.csv.gz)). Anything else is
// refused before it is opened: a directory, and a device, whose reads may
// never end (/dev/zero) or wait on a terminal.
func openTraceFile(path string) (io.ReadCloser, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if m := fi.Mode(); m.Type() != fs.ModeNamedPipe {
		if err := atomicfile.NotRegular(path, m); err != nil {
			return nil, err
		}
	}
	return os.Open(path)
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
	// Frees of addresses not allocated at the time in the trace: blocks
	// allocated before it began (their bytes count in PeakLiveLowerBound)
	// and addresses it freed already (no bytes): not replayed.
	UnmatchedFrees int `json:"unmatched_frees"`
	// LiveAtEnd is blocks still allocated when the trace ends.
	LiveAtEnd int `json:"live_at_end"`
	// TorchOOMs counts the allocations PyTorch failed in the trace (oom
	// events); the replay serves every allocation the trace shows made.
	TorchOOMs int `json:"torch_ooms,omitempty"`

	// PeakRequested is the most bytes requested at once (the sum of live
	// allocation sizes, the trace's own measure) by the allocations the
	// trace shows, the same for both: what the replay requests.
	PeakRequested int64 `json:"peak_requested_bytes"`
	// PeakLiveLowerBound is the most bytes live at once in the trace
	// counting the blocks allocated before it began that it frees
	// (UnmatchedFrees): each was live from its start until its
	// free_completed, with the size that event records. It is a lower
	// bound of what any allocator running the traced program held at
	// its peak (blocks from before the trace that it never frees are not
	// seen), and PeakRequested for a trace that frees no such block.
	PeakLiveLowerBound int64 `json:"peak_live_lower_bound_bytes"`

	// TorchPeakReserved is the peak of the bytes in segments the trace
	// shows PyTorch reserving (segment_alloc and segment_map minus
	// segment_free and segment_unmap): the bytes of the union of the
	// ranges reserved in the trace and not yet freed, so a range reserved
	// twice counts once and a free of a segment reserved before the trace
	// began takes nothing off.
	TorchPeakReserved int64   `json:"torch_peak_reserved_bytes"`
	TorchRatio        float64 `json:"torch_reserved_over_requested"`
	// TorchPreexistingPeak is the most bytes live at once in blocks that
	// lie in no segment the trace reserved, the blocks allocated before
	// the trace that it frees included (live from its start until their
	// free): PyTorch served them from segments it held before the trace
	// began, which TorchPeakReserved does not count.
	// TorchPeakReservedLowerBound is a lower bound of PyTorch's true peak
	// reserved bytes, always defined: if the trace frees no segment held
	// before it, those segments were all held at TorchPeakReserved's
	// moment too, and the bound is the sum of the two; if it does free
	// one, the bound is the most, at any one moment, of the bytes the
	// trace shows reserved plus the bytes then live in blocks outside
	// them. Either way it is at least the most bytes live at once (as
	// PeakLiveLowerBound, the sizes as recorded), which PyTorch held.
	TorchPreexistingPeak        int64   `json:"torch_preexisting_live_peak_bytes"`
	TorchPeakReservedLowerBound int64   `json:"torch_peak_reserved_lower_bound_bytes"`
	TorchRatioLowerBound        float64 `json:"torch_reserved_lower_bound_over_requested"`

	// Scale is -scale when not 1: every allocation was that many times as
	// large as in the trace (PeakRequested and PeakLiveLowerBound too;
	// PyTorch's figures, and the peak requested their ratios are over,
	// are the trace's as recorded).
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
	blocks, op, err := runOps(p, ops, slots)
	if err != nil {
		return out, errors.Join(fmt.Errorf("%s (%s): %w", where(path, op.event, op.line), out.Mode, err), freeAll(p, blocks), p.Close())
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
// blocks still live at the end; on an error, the op that failed.
func runOps(p *memory.Pool, ops []poolOp, slots int) (blocks []*memory.Block, failed poolOp, err error) {
	blocks = make([]*memory.Block, slots)
	for _, op := range ops {
		if op.free {
			err = p.Free(blocks[op.slot])
			blocks[op.slot] = nil
		} else {
			blocks[op.slot], err = p.Alloc(op.size, op.stream)
		}
		if err != nil {
			return blocks, op, err
		}
	}
	return blocks, poolOp{}, nil
}

// freeAll frees the blocks a replay that failed left live, so that the
// pool's Close reports no leak besides the replay's error.
func freeAll(p *memory.Pool, blocks []*memory.Block) error {
	var errs []error
	for _, b := range blocks {
		if b != nil {
			errs = append(errs, p.Free(b))
		}
	}
	return errors.Join(errs...)
}

type poolOp struct {
	event  int // index of the trace event, for errors
	line   int // and its line in the trace file (where)
	slot   int
	free   bool
	size   int64
	stream memory.Stream
}

// loadedTrace is a trace read and scanned once: PyTorch's side of it and
// the pool calls its replays make, for the check before the benchmark and
// for every replay.
type loadedTrace struct {
	res   traceResult
	ops   []poolOp
	slots int
}

// loadTrace reads and scans the trace at path, its allocations scale
// times as large (0 or 1: as recorded). The events are read once, and
// dropped once scanned.
func loadTrace(path string, scale float64) (*loadedTrace, error) {
	evs, err := readTrace(path)
	if err != nil {
		return nil, err
	}
	res, ops, slots, err := scanTrace(path, evs, scale)
	if err != nil {
		return nil, err
	}
	return &loadedTrace{res: res, ops: ops, slots: slots}, nil
}

// scanTrace computes PyTorch's side of a trace from its events, and lists
// the pool calls replay makes for them, with the number of block slots
// they use (a freed block's slot is reused). An allocation at an address
// already live is an error, as are more bytes held at once than an int64
// holds. scale other than 0 and 1 makes every allocation that many times
// as large (PeakRequested and PeakLiveLowerBound too; PyTorch's figures
// stay the trace's as recorded).
//
// A trace may start mid-run. A free_completed of a block it never showed
// allocated is of a block live since before the trace began: it counts
// from the trace's start until that free, with the size the free records,
// in PeakLiveLowerBound and in the blocks of segments held before the
// trace (TorchPreexistingPeak); it is not replayed.
func scanTrace(path string, evs []traceEvent, scale float64) (res traceResult, ops []poolOp, slots int, err error) {
	res = traceResult{File: filepath.Base(path), Events: len(evs)}
	scaled := scale != 0 && scale != 1
	if scaled {
		res.Scale = scale
	}
	// sizeOf is the size event i's block has in the replay: one the pool
	// can be asked for, else the trace is refused here, before any
	// benchmark runs, rather than by the replay.
	sizeOf := func(i int, ev traceEvent) (int64, error) {
		size := ev.size
		if !scaled {
			if size > maxTraceSize {
				return 0, fmt.Errorf("%s: size %d is more than the largest request, %d", where(path, i, ev.line), size, int64(maxTraceSize))
			}
			return size, nil
		}
		s := math.Round(float64(size) * scale)
		if s >= float64(maxTraceSize) { // 2^62: int64(s) would be more than maxTraceSize
			return 0, fmt.Errorf("%s: -scale %g makes its allocation of %d bytes more than the largest size", where(path, i, ev.line), scale, size)
		}
		return max(1, int64(s)), nil
	}
	type liveBlock struct {
		slot    int
		size    int64 // as replayed
		traced  int64 // as recorded
		outside bool  // in no segment the trace reserved
	}
	live := map[uint64]liveBlock{}
	// seen is every address the trace allocated or freed: a free at one
	// of them that is not live is no block from before the trace (a
	// double free, or a lost alloc), and is counted but adds no bytes.
	seen := map[uint64]bool{}
	var freeSlots []int
	var requested, reserved, outsideLive int64
	var traced, tracedPeak int64 // requested as recorded, for PyTorch's ratios
	// Blocks from before the trace: all of them are live at its start, and
	// their total is known only at its end; so the running figures below
	// are kept less the bytes of such blocks freed so far (preFreed*),
	// and their peaks, which start at 0 (the trace's start), get the total
	// (pre*) added at the end.
	var pre, preTraced, preFreed, preFreedTraced int64
	var livePeak, tracedLivePeak, outsidePeak, momentPeak int64
	var segs rangeSet // the memory the trace shows PyTorch reserving
	preexistingFreed := false
	// Sizes of up to 2^62 bytes each can still come to more than an
	// int64 holds: add notes a sum that wrapped, and the trace is refused
	// rather than reported with figures that look plausible (a peak of
	// blocks from before the trace that wrapped came out as 100 bytes).
	overflowed := false
	add := func(a, b int64) int64 {
		s := a + b
		if (s < a) != (b < 0) {
			overflowed = true
		}
		return s
	}
	for i, ev := range evs {
		switch ev.action {
		case actAlloc:
			if _, dup := live[ev.addr]; dup {
				return res, nil, 0, fmt.Errorf("%s: allocates address %#x, which is live", where(path, i, ev.line), ev.addr)
			}
			size, err := sizeOf(i, ev)
			if err != nil {
				return res, nil, 0, err
			}
			lb := liveBlock{slot: slots, size: size, traced: ev.size, outside: !segs.contains(ev.addr)}
			if k := len(freeSlots); k > 0 {
				lb.slot, freeSlots = freeSlots[k-1], freeSlots[:k-1]
			} else {
				slots++
			}
			live[ev.addr], seen[ev.addr] = lb, true
			ops = append(ops, poolOp{event: i, line: ev.line, slot: lb.slot, size: size, stream: memory.Stream(ev.stream)})
			requested = add(requested, size)
			traced = add(traced, ev.size)
			if lb.outside {
				outsideLive += ev.size
			}
			res.PeakRequested = max(res.PeakRequested, requested)
			tracedPeak = max(tracedPeak, traced)
			res.Allocs++
		case actFreeCompleted:
			lb, ok := live[ev.addr]
			if !ok {
				res.UnmatchedFrees++
				if !seen[ev.addr] {
					// Live since before the trace, in a segment held since
					// before it, until now.
					seen[ev.addr] = true
					size, err := sizeOf(i, ev)
					if err != nil {
						return res, nil, 0, err
					}
					pre, preTraced = add(pre, size), add(preTraced, ev.size)
					preFreed, preFreedTraced = add(preFreed, size), add(preFreedTraced, ev.size)
				}
				break
			}
			if ev.size != lb.traced {
				return res, nil, 0, fmt.Errorf("%s: frees address %#x as %d bytes, allocated as %d", where(path, i, ev.line), ev.addr, ev.size, lb.traced)
			}
			ops = append(ops, poolOp{event: i, line: ev.line, slot: lb.slot, free: true})
			delete(live, ev.addr)
			freeSlots = append(freeSlots, lb.slot)
			requested -= lb.size
			traced -= lb.traced
			if lb.outside {
				outsideLive -= lb.traced
			}
		case actSegmentAlloc, actSegmentMap:
			// Bytes already in segs (a range the trace holds twice) count
			// once.
			reserved = add(reserved, segs.add(ev.addr, ev.size))
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
		livePeak = max(livePeak, requested-preFreed)
		tracedLivePeak = max(tracedLivePeak, traced-preFreedTraced)
		outsidePeak = max(outsidePeak, outsideLive-preFreedTraced)
		momentPeak = max(momentPeak, add(reserved, outsideLive-preFreedTraced))
		if overflowed {
			return res, nil, 0, fmt.Errorf("%s: %s of %d bytes brings the bytes held at once past %d", where(path, i, ev.line), ev.action, ev.size, int64(math.MaxInt64))
		}
	}
	if res.Allocs == 0 {
		return res, nil, 0, fmt.Errorf("%s: no allocations to replay", path)
	}
	res.LiveAtEnd = len(live)
	res.PeakLiveLowerBound = add(pre, livePeak)
	res.TorchPreexistingPeak = add(preTraced, outsidePeak)
	// PyTorch held its live blocks at every moment, and at every moment
	// the ranges the trace shows reserved plus the blocks in segments
	// held since before it (disjoint from those ranges). When no segment
	// from before the trace is freed in it, those segments were all held
	// at its peak in-trace reservation, which gives the larger sum.
	res.TorchPeakReservedLowerBound = max(add(preTraced, tracedLivePeak), add(preTraced, momentPeak))
	if !preexistingFreed {
		res.TorchPeakReservedLowerBound = max(res.TorchPeakReservedLowerBound, add(res.TorchPeakReserved, res.TorchPreexistingPeak))
	}
	if overflowed {
		// Blocks from before the trace, live from its start, with those
		// it allocated or the segments it reserved.
		return res, nil, 0, fmt.Errorf("%s: the blocks freed that were allocated before it began, with those it allocates or the segments it reserves, come to more than %d bytes at once", path, int64(math.MaxInt64))
	}
	if tracedPeak > 0 {
		res.TorchRatio = float64(res.TorchPeakReserved) / float64(tracedPeak)
		res.TorchRatioLowerBound = float64(res.TorchPeakReservedLowerBound) / float64(tracedPeak)
	}
	return res, ops, slots, nil
}
