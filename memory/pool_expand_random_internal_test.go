package memory

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestExpandableRandomStreams: many streams, RecordStream on random other
// streams, events completing late, a held stream toggled now and then,
// EmptyCache at random points, a Limit, a device of bounded capacity,
// MaxSplitSize, small address spaces (several segments per stream),
// recorded events failing now and then, and data written at every half
// page of each block checked at its free; after each step the segments'
// invariants, the byte statistics against the blocks and the strict
// virtual memory's view, and after Close every page and reservation
// released. Written by a reviewer helper (session 40): seeds 0, 3 and 7
// failed at Close before the held streams' stale ranges were swept there.
func TestExpandableRandomStreams(t *testing.T) {
	for seed := range expandableRandomSeeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { expandableRandom(t, seed, 1500) })
	}
}

func expandableRandom(t *testing.T, seed uint64, steps int) {
	const mib = 1 << 20
	rng := rand.New(rand.NewPCG(seed, 0xabc))
	host := NewHostBackend(TierDevice).(*hostVM)
	vm := newStrictVM(host)
	ss := &holdSync{lateSync: newLateSync(), held: map[Stream]bool{}}
	if seed%7 == 3 {
		ss.failRNG = rand.New(rand.NewPCG(seed, 5))
	}
	space := int64(64+rng.IntN(4)*64) * mib
	cfg := PoolConfig{Expandable: true, StreamSync: ss}
	if seed%2 == 0 {
		cfg.Limit = int64(200+rng.IntN(300)) * mib
	}
	if seed%4 == 1 {
		vm.capacity = 60 + rng.IntN(60)
	}
	if seed%3 == 2 {
		cfg.MaxSplitSize = 32 * mib
	}
	p := NewPool(smallSpaceVM{VirtualMemory: vm, space: space}, cfg)
	w := &randomPool{p: p, vm: vm, ss: ss, nstreams: 2 + rng.IntN(4), allowed: func(op string, err error) bool {
		return op == "alloc" && errors.Is(err, ErrOutOfMemory) || op == "free" && errors.Is(err, errRecordFault)
	}}
	ooms := 0
	for step := range steps {
		if w.step(t, rng, fmt.Sprintf("seed %d step %d", seed, step)) {
			ooms++
		}
	}
	live := w.live
	for _, l := range live {
		checkHalfPages(t, l.b, l.fill, "end")
	}
	if seed%2 == 1 {
		for _, l := range live {
			if err := p.Free(l.b); err != nil {
				require.ErrorIs(t, err, errRecordFault)
			}
		}
		require.NoError(t, p.EmptyCache())
		u := p.Stats()
		require.Zero(t, u.Allocated.Current)
		if ss.failRNG == nil {
			require.Zero(t, u.Active.Current)
		}
	}
	err := p.Close()
	if seed%2 == 1 {
		require.NoError(t, err)
	} else if len(live) > 0 {
		require.ErrorIs(t, err, ErrLeaked)
	}
	require.NoError(t, vm.err)
	requireAllReleased(t, p, vm, host)
	t.Logf("seed %d: %d OOMs, peak reserved %d MiB", seed, ooms, p.Stats().Reserved.Peak>>20)
}

var expandableRandomSeeds = uint64(12)

// checkPoolStats checks the pool's byte statistics and each segment's
// live counts against its blocks (p.mu held).
func checkPoolStats(t testing.TB, p *Pool, at string) {
	t.Helper()
	var alloc, pending, inactive, req int64
	for seg := p.segs; seg != nil; seg = seg.next {
		var live int
		var liveBytes int64
		for b := seg.first; b != nil; b = b.next {
			switch b.state {
			case blockLive:
				alloc += b.size
				req += b.requested
				live++
				liveBytes += b.size
			case blockPending:
				pending += b.size
				live++
				liveBytes += b.size
			}
		}
		require.Equal(t, live, seg.live, "%s: seg live", at)
		require.Equal(t, liveBytes, seg.liveBytes, "%s: seg liveBytes", at)
		inactive += seg.inactive()
	}
	u := p.sinks.own.snapshot()
	require.Equal(t, alloc, u.Allocated.Current, "%s: allocated", at)
	require.Equal(t, req, u.Requested.Current, "%s: requested", at)
	require.Equal(t, alloc+pending, u.Active.Current, "%s: active", at)
	require.Equal(t, inactive, u.InactiveSplit.Current, "%s: inactive split", at)
}

// TestExpandableRandomFaults: the streams workload of expandableRandom over a virtual
// memory failing a share of its calls; once the faults stop, everything
// is freed and every page and reservation must go back.
func TestExpandableRandomFaults(t *testing.T) {
	for seed := range uint64(12) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { expandableFaults(t, seed, 1500) })
	}
}

func expandableFaults(t *testing.T, seed uint64, steps int) {
	const mib = 1 << 20
	rng := rand.New(rand.NewPCG(seed, 0xfa))
	host := NewHostBackend(TierDevice).(*hostVM)
	vm := newStrictVM(host)
	allOps := []string{"create", "map", "unmap", "sync", "reserve"}
	fv := &flakyVM{VirtualMemory: vm, rng: rand.New(rand.NewPCG(seed, 3)), rate: 0.05 + 0.1*rng.Float64(), ops: map[string]bool{}}
	for _, o := range allOps {
		if rng.IntN(2) == 0 {
			fv.ops[o] = true
		}
	}
	ops := fv.ops
	ss := &holdSync{lateSync: newLateSync(), held: map[Stream]bool{}}
	cfg := PoolConfig{Expandable: true, StreamSync: ss}
	if seed%2 == 0 {
		cfg.Limit = int64(200+rng.IntN(300)) * mib
	}
	if seed%3 == 2 {
		cfg.MaxSplitSize = 32 * mib
	}
	p := NewPool(smallSpaceVM{VirtualMemory: fv, space: int64(64+rng.IntN(4)*64) * mib}, cfg)
	w := &randomPool{p: p, vm: vm, ss: ss, nstreams: 2 + rng.IntN(4), allowed: func(op string, err error) bool {
		return op == "alloc" && errors.Is(err, ErrOutOfMemory) || op != "free" && errors.Is(err, errVMFault)
	}}
	for step := range steps {
		w.step(t, rng, fmt.Sprintf("seed %d step %d (faults %v)", seed, step, ops))
	}
	live := w.live
	fv.ops = nil
	for _, l := range live {
		checkHalfPages(t, l.b, l.fill, "end")
		require.NoError(t, p.Free(l.b))
	}
	clear(ss.held)
	require.NoError(t, p.EmptyCache())
	u := p.Stats()
	require.Zero(t, u.Allocated.Current)
	require.Zero(t, u.Active.Current)
	require.NoError(t, p.Close())
	require.NoError(t, vm.err)
	requireAllReleased(t, p, vm, host)
}

// randomPool is the pool of the randomized expandable workloads, what it
// is checked against and its live blocks.
type randomPool struct {
	p        *Pool
	vm       *strictVM
	ss       *holdSync
	nstreams int
	live     []filledBlock
	// allowed reports whether an operation's error ("alloc", "free",
	// "empty": EmptyCache) is one the workload expects.
	allowed func(op string, err error) bool
}

// step does one random operation (an allocation, a use on another
// stream, a free, streams' work done, a stream held or let go, EmptyCache)
// and checks the pool after it; it reports whether an allocation was
// refused with an allowed error.
func (w *randomPool) step(t *testing.T, rng *rand.Rand, at string) (refused bool) {
	p, vm := w.p, w.vm
	lo, hi := math.Log(512), math.Log(48<<20)
	switch r := rng.IntN(100); {
	case r < 40 || len(w.live) == 0:
		size := int64(math.Exp(lo + rng.Float64()*(hi-lo)))
		s := Stream(1 + rng.IntN(w.nstreams))
		b, err := p.Alloc(size, s)
		if err != nil {
			require.True(t, w.allowed("alloc", err), "%s: %v", at, err)
			refused = true
			break
		}
		p.mu.Lock()
		checkBlockMapped(t, p, b, RoundSize(size), at)
		vm.checkDeviceMapped(t, p, b, at)
		p.mu.Unlock()
		f := byte(rng.Uint32())
		fillHalfPages(b, f)
		w.live = append(w.live, filledBlock{b, f})
	case r < 50:
		i := rng.IntN(len(w.live))
		require.NoError(t, p.RecordStream(w.live[i].b, Stream(1+rng.IntN(w.nstreams))), at)
	case r < 80:
		i := rng.IntN(len(w.live))
		checkHalfPages(t, w.live[i].b, w.live[i].fill, at)
		if err := p.Free(w.live[i].b); err != nil {
			require.True(t, w.allowed("free", err), "%s: %v", at, err)
		}
		w.live[i] = w.live[len(w.live)-1]
		w.live = w.live[:len(w.live)-1]
	case r < 93:
		w.ss.complete(rng, Stream(1+rng.IntN(w.nstreams)))
	case r < 96:
		s := Stream(1 + rng.IntN(w.nstreams))
		w.ss.held[s] = !w.ss.held[s]
	default:
		if err := p.EmptyCache(); err != nil {
			require.True(t, w.allowed("empty", err), "%s: %v", at, err)
		}
	}
	p.mu.Lock()
	checkExpandable(t, p)
	checkPoolStats(t, p, at)
	require.NoError(t, vm.err, at)
	vm.checkAgrees(t, p, at)
	p.mu.Unlock()
	if limit := p.cfg.Limit; limit > 0 {
		require.LessOrEqual(t, p.Stats().Reserved.Current, limit, at)
	}
	return refused
}

// filledBlock is a live block and the byte written over it.
type filledBlock struct {
	b    *Block
	fill byte
}

// fillHalfPages writes v every half host page of b and at its last byte.
func fillHalfPages(b *Block, v byte) {
	h := b.Host()
	for i := 0; i < len(h); i += int(HostPageSize) / 2 {
		h[i] = v
	}
	h[len(h)-1] = v
}

// checkHalfPages checks the bytes fillHalfPages wrote.
func checkHalfPages(t *testing.T, b *Block, v byte, at string) {
	h := b.Host()
	for i := 0; i < len(h); i += int(HostPageSize) / 2 {
		if h[i] != v {
			require.Failf(t, "data lost", "%s: byte %d of block at %#x (%d bytes): %d want %d", at, i, b.addr, len(h), h[i], v)
		}
	}
	require.Equal(t, v, h[len(h)-1], "%s: last byte", at)
}

// requireAllReleased checks a closed pool: no bytes counted, every page
// and reservation given back.
func requireAllReleased(t *testing.T, p *Pool, vm *strictVM, host *hostVM) {
	u := p.Stats()
	require.Zero(t, u.Reserved.Current, "reserved after close")
	require.Zero(t, u.Allocated.Current, "allocated after close")
	require.Zero(t, u.Requested.Current, "requested after close")
	require.Zero(t, u.Active.Current, "active after close")
	require.Zero(t, u.InactiveSplit.Current, "inactive split after close")
	require.Empty(t, vm.places, "every page released")
	require.Empty(t, host.pages, "every page released")
	require.Empty(t, host.reservations, "every reservation released")
}
