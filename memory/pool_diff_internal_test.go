package memory

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
)

// diffSync is a StreamSync whose events complete when their stream is
// completed (or waited for).
type diffSync struct {
	next   StreamEvent
	stream map[StreamEvent]Stream
	done   map[StreamEvent]bool
	held   map[Stream]bool
}

func newDiffSync() *diffSync {
	return &diffSync{stream: map[StreamEvent]Stream{}, done: map[StreamEvent]bool{}, held: map[Stream]bool{}}
}
func (f *diffSync) RecordEvent(s Stream) (StreamEvent, error) {
	f.next++
	f.stream[f.next] = s
	return f.next, nil
}
func (f *diffSync) Done(ev StreamEvent) bool  { return f.done[ev] }
func (f *diffSync) Wait(ev StreamEvent) error { f.done[ev] = true; return nil }
func (f *diffSync) Release(ev StreamEvent)    { delete(f.stream, ev); delete(f.done, ev) }

// diffWaiter can also order a stream after an event.
type diffWaiter struct{ *diffSync }

func (f diffWaiter) WaitOnStream(s Stream, ev StreamEvent) error { return nil }

// diffHolder holds the streams marked in held too.
type diffHolder struct{ *diffSync }

func (f diffHolder) WaitOnStream(s Stream, ev StreamEvent) error { return nil }
func (f diffHolder) Held(s Stream) bool                          { return f.held[s] }

func (f *diffSync) complete(s Stream) {
	for ev, es := range f.stream {
		if es == s {
			f.done[ev] = true
		}
	}
}

// diffExpected is the reference's best fit for rounded bytes on stream s:
// the smallest (size, address) free block of the index the request uses,
// of stream s, within [rounded, takeLimit).
func diffExpected(p *Pool, rounded int64, s Stream) *Block {
	k := 0
	if rounded > SmallSize {
		k = 1
	}
	idx := p.indexes[k]
	lo, hi := freeKey{size: rounded}, p.takeLimit(rounded)
	var best *Block
	for seg := p.segs; seg != nil; seg = seg.next {
		if seg.idx != idx || seg.stream != s {
			continue
		}
		for b := seg.first; b != nil; b = b.next {
			if b.state != blockFree {
				continue
			}
			kb := keyOf(b)
			if kb.less(lo) || !kb.less(hi) {
				continue
			}
			if best == nil || kb.less(keyOf(best)) {
				best = b
			}
		}
	}
	return best
}

// diffCheck checks the pool's segments, blocks, index counts and
// statistics against a recount.
func diffCheck(t *testing.T, p *Pool, live map[*Block]Stream, full bool) {
	t.Helper()
	var allocated, active, inactive, mapped int64
	nfree := map[*freeIndex]int{}
	frees := map[*Block]bool{}
	for seg := p.segs; seg != nil; seg = seg.next {
		at := seg.region.Addr
		var nlive int
		var liveBytes int64
		var prev *Block
		for b := seg.first; b != nil; b = b.next {
			if b.seg != seg {
				t.Fatalf("block at %#x: wrong segment", b.addr)
			}
			if b.prev != prev {
				t.Fatalf("block at %#x: prev link wrong", b.addr)
			}
			if b.addr != at {
				t.Fatalf("segment %#x: block at %#x, expected %#x", seg.region.Addr, b.addr, at)
			}
			at += uintptr(b.size)
			switch b.state {
			case blockFree:
				if prev != nil && prev.state == blockFree {
					t.Fatalf("two adjacent free blocks at %#x", b.addr)
				}
				nfree[seg.idx]++
				frees[b] = true
			case blockLive:
				nlive++
				liveBytes += b.size
				allocated += b.size
				active += b.size
				if _, ok := live[b]; !ok {
					t.Fatalf("live block at %#x not held by the test", b.addr)
				}
			case blockPending:
				nlive++
				liveBytes += b.size
				active += b.size
			}
			prev = b
		}
		if at != seg.region.Addr+uintptr(seg.region.Size) {
			t.Fatalf("segment %#x not tiled: ends at %#x", seg.region.Addr, at)
		}
		if nlive != seg.live || liveBytes != seg.liveBytes {
			t.Fatalf("segment %#x: live %d/%d bytes counted, %d/%d found", seg.region.Addr, seg.live, seg.liveBytes, nlive, liveBytes)
		}
		inactive += seg.inactive()
		mapped += seg.mapped
		if seg.x != nil {
			var m int64
			for i, pg := range seg.x.pages {
				if pg != 0 && !(i < len(seg.x.stale) && seg.x.stale[i]) {
					m += p.page
				}
			}
			if m != seg.mapped {
				t.Fatalf("segment %#x: mapped %d, pages %d", seg.region.Addr, seg.mapped, m)
			}
			for b := seg.first; b != nil; b = b.next {
				off := int64(b.addr - seg.region.Addr)
				if b.state == blockHole || b.state == blockStale {
					if off%p.page != 0 || b.size%p.page != 0 {
						t.Fatalf("segment %#x: hole/stale block at %#x not page-aligned", seg.region.Addr, off)
					}
					for i := off / p.page; i < min((off+b.size)/p.page, int64(len(seg.x.pages))); i++ {
						has := i < int64(len(seg.x.pages)) && seg.x.pages[i] != 0
						st := i < int64(len(seg.x.stale)) && seg.x.stale[i]
						if b.state == blockHole && has || b.state == blockStale && !(has && st) {
							t.Fatalf("segment %#x: block at %#x state %d over page %d (mapped %v stale %v)", seg.region.Addr, off, b.state, i, has, st)
						}
					}
				} else if b.state == blockFree {
					for i := off / p.page; i <= (off+b.size-1)/p.page; i++ {
						if i >= int64(len(seg.x.pages)) || seg.x.pages[i] == 0 || i < int64(len(seg.x.stale)) && seg.x.stale[i] {
							t.Fatalf("segment %#x: free block at %#x (%d bytes) over unmapped or stale page %d", seg.region.Addr, off, b.size, i)
						}
					}
				}
			}
		}
	}
	if p.vm != nil {
		var tiny int64
		for seg := p.segs; seg != nil; seg = seg.next {
			if seg.x == nil {
				continue
			}
			counts := map[int64]int32{}
			for b := seg.first; b != nil; b = b.next {
				if b.state == blockLive && b.size <= p.tinyMax {
					counts[int64(b.addr-seg.region.Addr)>>p.pageShift]++
					tiny++
				}
			}
			for i, n := range seg.x.tiny {
				if n != counts[int64(i)] {
					t.Fatalf("segment %#x: page %d counts %d tiny blocks, holds %d", seg.region.Addr, i, n, counts[int64(i)])
				}
			}
		}
		if tiny != p.tinyLive {
			t.Fatalf("tinyLive %d, live tiny blocks %d", p.tinyLive, tiny)
		}
	}
	u := p.sinks.own.snapshot()
	if u.Allocated.Current != allocated {
		t.Fatalf("Allocated %d, blocks %d", u.Allocated.Current, allocated)
	}
	if u.Active.Current != active {
		t.Fatalf("Active %d, blocks %d", u.Active.Current, active)
	}
	if u.InactiveSplit.Current != inactive {
		t.Fatalf("InactiveSplit %d, segments %d", u.InactiveSplit.Current, inactive)
	}
	if p.vm == nil && u.Reserved.Current != mapped {
		t.Fatalf("Reserved %d, segments %d", u.Reserved.Current, mapped)
	}
	for _, x := range []*freeIndex{&p.small, &p.large} {
		if x.Len() != nfree[x] {
			t.Fatalf("index len %d, free blocks %d", x.Len(), nfree[x])
		}
	}
	if full {
		for _, x := range []*freeIndex{&p.small, &p.large} {
			n := 0
			x.ascend(func(b *Block) bool {
				if !frees[b] || b.seg.idx != x {
					t.Fatalf("index holds block at %#x that is not free there", b.addr)
				}
				n++
				return true
			})
			if n != x.Len() {
				t.Fatalf("ascend saw %d of %d", n, x.Len())
			}
		}
	}
	if p.vm != nil {
		if err := p.checkExpandable(); err != nil {
			t.Fatal(err)
		}
	}
}

func diffSize(rng *rand.Rand) int64 {
	switch rng.IntN(6) {
	case 0:
		return 1 + rng.Int64N(4096)
	case 1:
		return 1 + rng.Int64N(64<<10)
	case 2:
		return 1 + rng.Int64N(SmallSize)
	case 3:
		return SmallSize - 1024 + rng.Int64N(2048)
	case 4:
		return 1 + rng.Int64N(8<<20)
	default:
		return 1 + rng.Int64N(64<<20)
	}
}

// TestPoolDifferential drives pools with random operations and checks each
// allocation against a reference best fit and the bookkeeping after each
// step.
func TestPoolDifferential(t *testing.T) {
	type cfgCase struct {
		maxSplit   int64
		expandable bool
		limit      int64
		plan       bool
		faults     bool
	}
	cases := []cfgCase{{0, false, 0, false, false}, {32 << 20, false, 0, false, false}, {0, true, 0, false, false}, {32 << 20, true, 0, false, false},
		{0, false, 600 << 20, false, false}, {32 << 20, false, 600 << 20, false, false}, {0, true, 600 << 20, false, false}, {0, true, 0, true, false}, {0, true, 600 << 20, true, false},
		{0, true, 0, false, true}, {32 << 20, true, 600 << 20, false, true}, {0, true, 0, true, true}, {0, true, 600 << 20, true, true}}
	for ci, c := range cases {
		nseeds := uint64(2)
		if v, err := strconv.Atoi(os.Getenv("DIFF_SEEDS")); err == nil {
			nseeds = uint64(v)
		}
		for seed := uint64(1); seed <= nseeds; seed++ {
			t.Run(fmt.Sprintf("cfg%d/seed%d", ci, seed), func(t *testing.T) {
				sync := newDiffSync()
				var backend Backend = &hotTestBackend{}
				var vm *strictVM
				var fl *flakyVM
				steps := 3000
				if c.expandable {
					var inner VirtualMemory = NewHostBackend(TierDevice).(VirtualMemory)
					if c.faults {
						fl = &flakyVM{VirtualMemory: inner, rng: rand.New(rand.NewPCG(seed, 3)), rate: 0.05,
							ops: map[string]bool{"create": true, "map": true, "unmap": true, "sync": true, "reserve": true}}
						inner = fl
					}
					vm = newStrictVM(inner)
					backend = vm
					steps = 800
				}
				var ss StreamSync = sync
				switch seed % 3 {
				case 1:
					ss = diffWaiter{sync}
				case 2:
					ss = diffHolder{sync}
				}
				p := NewPool(backend, PoolConfig{MaxSplitSize: c.maxSplit, Expandable: c.expandable, StreamSync: ss, Limit: c.limit, PlanSteps: c.plan})
				rng := rand.New(rand.NewPCG(seed, uint64(ci)))
				live := map[*Block]Stream{}
				var order []*Block
				var nOOM, nFit, nNew int // for a look with -v
				defer func() { t.Logf("failed %d, best fits %d, new blocks %d", nOOM, nFit, nNew) }()
				for step := 0; step < steps; step++ {
					op := rng.IntN(20)
					switch {
					case op < 10 || len(order) == 0:
						size := diffSize(rng)
						if c.expandable && rng.IntN(4) == 0 {
							size = 1 + rng.Int64N(8<<10)
						}
						s := Stream(rng.IntN(3))
						rounded := RoundSize(size)
						var want *Block
						var wantKey freeKey
						if len(p.pending) > 0 {
							p.mu.Lock()
							_ = p.processEvents(false)
							p.mu.Unlock()
						}
						checked := rounded > p.placeMax && len(p.pending) == 0
						if checked {
							want = diffExpected(p, rounded, s)
							if want != nil {
								wantKey = keyOf(want)
							}
						}
						type fbk struct {
							addr uintptr
							size int64
							seg  *segment
						}
						var before []fbk
						for seg := p.segs; seg != nil; seg = seg.next {
							for fb := seg.first; fb != nil; fb = fb.next {
								if fb.state == blockFree {
									before = append(before, fbk{fb.addr, fb.size, fb.seg})
								}
							}
						}
						b, err := p.Alloc(size, s)
						if err != nil {
							if c.limit > 0 && isOOM(err) || c.faults && errors.Is(err, errVMFault) {
								diffCheck(t, p, live, true)
								nOOM++
								continue
							}
							t.Fatalf("step %d: alloc %d: %v", step, size, err)
						}
						if b.seg.stream != s {
							t.Fatalf("step %d: block of stream %d for stream %d", step, b.seg.stream, s)
						}
						if b.size < rounded {
							t.Fatalf("step %d: block of %d for %d", step, b.size, rounded)
						}
						if want != nil && b.addr != wantKey.addr {
							t.Fatalf("step %d: alloc %d (rounded %d) on stream %d: got block at %#x (%d bytes), reference best fit %#x (%d bytes)",
								step, size, rounded, s, b.addr, b.size, wantKey.addr, wantKey.size)
						}
						if checked && want == nil && !c.expandable {
							if b.seg.first != b || b.prev != nil {
								for _, fb := range before {
									if fb.addr == b.addr {
										t.Logf("was free: %#x size %d stream %d small %v", fb.addr, fb.size, fb.seg.stream, fb.seg.small)
									}
								}
								t.Fatalf("step %d: no fit in the reference, but block at %#x (%d bytes, stream %d, small %v) for %d (rounded %d) on stream %d is not a new segment's", step, b.addr, b.size, b.seg.stream, b.seg.small, size, rounded, s)
							}
						}
						if want != nil {
							nFit++
						} else if checked {
							nNew++
						}
						live[b] = s
						order = append(order, b)
					case op < 17:
						i := rng.IntN(len(order))
						b := order[i]
						order[i] = order[len(order)-1]
						order = order[:len(order)-1]
						delete(live, b)
						if rng.IntN(4) == 0 {
							if err := p.RecordStream(b, Stream(3+rng.IntN(2))); err != nil {
								t.Fatal(err)
							}
						}
						if err := p.Free(b); err != nil {
							t.Fatalf("step %d: free: %v", step, err)
						}
					case op < 19:
						sync.complete(Stream(3 + rng.IntN(2)))
					default:
						if seed%3 == 2 && rng.IntN(2) == 0 {
							sync.held[1] = !sync.held[1]
						} else if rng.IntN(3) == 0 {
							if err := p.EmptyCache(); err != nil && !(c.faults && errors.Is(err, errVMFault)) {
								t.Fatal(err)
							}
						}
					}
					diffCheck(t, p, live, step%97 == 0)
					if vm != nil {
						vm.checkAgrees(t, p, fmt.Sprint("step ", step))
						if u := p.sinks.own; u.Reserved.Current != int64(len(vm.places))*p.page {
							t.Fatalf("step %d: Reserved %d, %d pages alive", step, u.Reserved.Current, len(vm.places))
						}
					}
				}
				sync.held[1] = false
				if fl != nil {
					fl.ops = nil
				}
				for _, b := range order {
					if err := p.Free(b); err != nil {
						t.Fatal(err)
					}
				}
				if err := p.EmptyCache(); err != nil {
					t.Fatal(err)
				}
				diffCheck(t, p, nil, true)
				if u := p.Stats(); u.Reserved.Current != 0 && !c.expandable {
					t.Fatalf("reserved %d after emptying", u.Reserved.Current)
				}
				if err := p.Close(); err != nil {
					t.Fatal(err)
				}
				if vm != nil && vm.err != nil {
					t.Fatal(vm.err)
				}
				if vm != nil && (len(vm.places) != 0 || len(vm.at) != 0) {
					t.Fatalf("after Close: %d pages alive, %d mapped", len(vm.places), len(vm.at))
				}
			})
		}
	}
}

// TestPoolDifferentialSteps repeats a random step of allocations and
// frees on an expandable pool with step plans, so that plans form, run
// and deviate, checking the bookkeeping and the device's pages after
// every call.
func TestPoolDifferentialSteps(t *testing.T) {
	nseeds := uint64(4)
	if v, err := strconv.Atoi(os.Getenv("DIFF_SEEDS")); err == nil {
		nseeds = uint64(v)
	}
	for seed := uint64(1); seed <= nseeds; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 5))
			var inner VirtualMemory = NewHostBackend(TierDevice).(VirtualMemory)
			var fl *flakyVM
			if seed > 4 {
				fl = &flakyVM{VirtualMemory: inner, rng: rand.New(rand.NewPCG(seed, 3)), rate: 0.03,
					ops: map[string]bool{"create": true, "map": true, "unmap": true, "sync": true, "reserve": true}}
				inner = fl
			}
			sync := newDiffSync()
			var ss StreamSync = diffWaiter{sync}
			if seed%2 == 0 {
				ss = diffHolder{sync}
			}
			vm := newStrictVM(inner)
			cfg := PoolConfig{Expandable: true, PlanSteps: true, StreamSync: ss}
			if seed%4 >= 3 {
				cfg.Limit = 512 << 20
			}
			p := NewPool(vm, cfg)
			type item struct {
				size   int64
				stream Stream
				dies   int // index of the op after which it is freed; -1 never
			}
			const n = 320
			step := make([]item, n)
			for i := range step {
				sz := int64(1 + rng.IntN(4096))
				switch rng.IntN(4) {
				case 0:
					sz = 1 + rng.Int64N(SmallSize)
				case 1:
					sz = 1 + rng.Int64N(16<<20)
				}
				d := i + 1 + rng.IntN(n-i)
				if rng.IntN(40) == 0 {
					d = -1
				}
				s := Stream(0)
				if rng.IntN(10) == 0 {
					s = 1
				}
				step[i] = item{sz, s, d}
			}
			live := map[*Block]Stream{}
			var forever []*Block
			for rep := 0; rep < 10; rep++ {
				blocks := make([]*Block, n)
				dying := make([][]int, n+1)
				for i, it := range step {
					if it.dies >= 0 {
						dying[it.dies] = append(dying[it.dies], i)
					}
				}
				for i, it := range step {
					size := it.size
					if rep >= 6 && rng.IntN(30) == 0 {
						size = 1 + rng.Int64N(2<<20) // deviate
					}
					b, err := p.Alloc(size, it.stream)
					if err != nil {
						if cfg.Limit > 0 && isOOM(err) || fl != nil && errors.Is(err, errVMFault) {
							diffCheck(t, p, live, false)
							continue
						}
						t.Fatalf("rep %d item %d: %v", rep, i, err)
					}
					if b.seg.stream != it.stream || b.size < RoundSize(size) {
						t.Fatalf("rep %d item %d: wrong block", rep, i)
					}
					live[b] = it.stream
					if it.dies < 0 && rep < 2 {
						forever = append(forever, b)
					} else {
						blocks[i] = b
					}
					for _, j := range dying[i+1] {
						if j <= i && blocks[j] != nil {
							if rng.IntN(8) == 0 {
								_ = p.RecordStream(blocks[j], 2)
							}
							delete(live, blocks[j])
							if err := p.Free(blocks[j]); err != nil {
								t.Fatal(err)
							}
							blocks[j] = nil
						}
					}
					if rng.IntN(16) == 0 {
						sync.complete(2)
					}
					if seed%2 == 0 && rng.IntN(64) == 0 {
						sync.held[1] = !sync.held[1]
					}
					diffCheck(t, p, live, i%50 == 0)
					vm.checkAgrees(t, p, fmt.Sprint("rep ", rep, " item ", i))
				}
				for j, b := range blocks {
					if b != nil {
						delete(live, b)
						if err := p.Free(b); err != nil {
							t.Fatal(err)
						}
						blocks[j] = nil
					}
				}
				if rep == 7 || rep == 4 {
					sync.complete(2)
					if err := p.EmptyCache(); err != nil && !(fl != nil && errors.Is(err, errVMFault)) {
						t.Fatal(err)
					}
				}
				diffCheck(t, p, live, true)
			}
			t.Logf("plans %d planned %d deviations %d", p.planner.plans, p.planner.planned, p.planner.deviations)
			sync.held[1] = false
			if fl != nil {
				fl.ops = nil
			}
			for _, b := range forever {
				delete(live, b)
				if err := p.Free(b); err != nil {
					t.Fatal(err)
				}
			}
			sync.complete(2)
			if err := p.EmptyCache(); err != nil {
				t.Fatal(err)
			}
			diffCheck(t, p, live, true)
			if err := p.Close(); err != nil {
				t.Fatal(err)
			}
			if vm.err != nil || len(vm.places) != 0 || len(vm.at) != 0 {
				t.Fatalf("after Close: %v, %d pages alive, %d mapped", vm.err, len(vm.places), len(vm.at))
			}
		})
	}
}

// inactive is the segment's contribution to InactiveSplit, by its
// definition: its free bytes when it also holds live or pending blocks,
// else nothing (a fully free segment can be given back, so it is cache,
// not fragmentation). The pool derives InactiveSplit from other sums
// (liveUsage); the tests count it from the segments with this.
func (s *segment) inactive() int64 {
	if s.live == 0 {
		return 0
	}
	return s.mapped - s.liveBytes
}
