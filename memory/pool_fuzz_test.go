package memory_test

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/memory/memtest"
)

// fuzzLive is a block the fuzzer holds, with the seed of the pattern it
// wrote into it.
type fuzzLive struct {
	b    *memory.Block
	seed byte
}

// FuzzPool runs random sequences of Alloc, Free, EmptyCache and
// cross-stream use on a pool over host memory and checks after every step
// that the segments are tiled by coalesced blocks, that no live blocks
// overlap, that every live block still holds the pattern written into it,
// and that the statistics add up; at the end, that Close gives every
// region and every event token back. The GPU tests run the same body over
// device memory (TestGPUDevicePoolRandom).
//
// Input: one configuration byte (limit, max split size, backend budget,
// cross-stream tracking), then triples (op, a, b). op%8 < 5 allocates a
// size of the class op>>3&3 taken from a and b on stream op>>5&1; 5 frees
// the live block a<<8|b (modulo the count); 6 frees it too, or with
// tracking records its use on stream op>>5&3; 7 empties the cache, or with
// tracking and an odd a finishes the work of every stream.
func FuzzPool(f *testing.F) {
	for _, seed := range fuzzSeeds() {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) { runPoolOps(t, data, hostFuzzEnv()) })
}

// fuzzSeeds is FuzzPool's corpus: a few hand-made inputs and random ones,
// with and without cross-stream tracking.
func fuzzSeeds() [][]byte {
	seeds := [][]byte{
		{0, 0, 0, 10, 8, 1, 0, 5, 0, 0, 7, 0, 0},
		{1, 24, 255, 255, 24, 255, 255, 24, 255, 255, 5, 0, 1, 16, 3, 3},
		{6, 32, 0, 1, 0, 0, 9, 5, 0, 0, 5, 0, 0, 7, 0, 0, 40, 1, 1},
		{8, 0, 0, 1, 0, 1, 2, 38, 0, 0, 5, 0, 0, 0, 0, 3, 7, 1, 0, 0, 0, 4},
	}
	rng := rand.New(rand.NewPCG(7, 11))
	for i := range 8 {
		seq := make([]byte, 1+3*120)
		for i := range seq {
			seq[i] = byte(rng.Uint32())
		}
		if i >= 4 {
			seq[0] |= 8
		}
		seeds = append(seeds, seq)
	}
	return seeds
}

// fuzzEnv is what runPoolOps needs of the memory under the pool: a fresh
// backend, and a way to write and check a pattern in a block.
type fuzzEnv struct {
	backend func() memory.Backend
	fill    func(b *memory.Block, seed byte) error
	check   func(b *memory.Block, seed byte) error
}

// hostFuzzEnv is host memory, patterned through the blocks' host views.
func hostFuzzEnv() fuzzEnv {
	return fuzzEnv{
		backend: func() memory.Backend { return memory.NewHostBackend(memory.TierHost) },
		fill:    func(b *memory.Block, seed byte) error { memtest.Fill(b.Host(), seed); return nil },
		check:   func(b *memory.Block, seed byte) error { return memtest.Check(b.Host(), seed) },
	}
}

// maxFuzzOps bounds the steps of one input, so each runs in milliseconds.
const maxFuzzOps = 200

// runPoolOps is FuzzPool's body.
func runPoolOps(t *testing.T, data []byte, env fuzzEnv) {
	if len(data) == 0 {
		return
	}
	cfg := memory.PoolConfig{}
	if data[0]&1 != 0 {
		cfg.Limit = 48 * MiB
	}
	if data[0]&2 != 0 {
		cfg.MaxSplitSize = 24 * MiB
	}
	budget := 128 * MiB
	if data[0]&4 != 0 {
		budget = 40 * MiB
	}
	var ss *memtest.StreamSync
	if data[0]&8 != 0 {
		ss = memtest.NewStreamSync()
		cfg.StreamSync = ss
	}
	fb := memtest.NewFaultBackend(env.backend(), budget)
	p := memory.NewPool(fb, cfg)
	var live []fuzzLive
	seed := byte(0)
	for n, ops := 0, data[1:]; len(ops) >= 3 && n < maxFuzzOps; n, ops = n+1, ops[3:] {
		op, v := ops[0], int64(ops[1])<<8|int64(ops[2])
		switch {
		case op%8 == 6 && ss != nil:
			if len(live) > 0 {
				require.NoError(t, p.RecordStream(live[int(v)%len(live)].b, memory.Stream(op>>5&3)))
			}
		case op%8 == 5 || op%8 == 6:
			if len(live) == 0 {
				continue
			}
			i := int(v) % len(live)
			l := live[i]
			if err := env.check(l.b, l.seed); err != nil {
				t.Fatalf("block at %#x of %d bytes was overwritten: %v", l.b.Addr(), l.b.Size(), err)
			}
			require.NoError(t, p.Free(l.b))
			live[i] = live[len(live)-1]
			live = live[:len(live)-1]
		case op%8 == 7 && ss != nil && ops[1]&1 != 0:
			ss.CompleteAll()
		case op%8 == 7:
			require.NoError(t, p.EmptyCache())
		default:
			size := fuzzSize(op>>3&3, v)
			b, err := p.Alloc(size, memory.Stream(op>>5&1))
			if err != nil {
				var oom *memory.OOMError
				require.ErrorAs(t, err, &oom, "the only failure expected is out of memory")
				require.Equal(t, size, oom.Requested)
				continue
			}
			seed++
			require.NoError(t, env.fill(b, seed), "filling a block of %d bytes", size)
			live = append(live, fuzzLive{b, seed})
		}
		checkPool(t, p, fb, cfg, live)
	}
	for _, l := range live {
		require.NoError(t, env.check(l.b, l.seed))
	}
	err := p.Close()
	if len(live) > 0 {
		require.ErrorIs(t, err, memory.ErrLeaked)
	} else {
		require.NoError(t, err)
	}
	n, bytes := fb.Live()
	require.Zero(t, n, "regions not returned on Close")
	require.Zero(t, bytes)
	if ss != nil {
		require.NoError(t, ss.Err(), "StreamSync protocol")
		require.Zero(t, ss.Outstanding(), "event tokens not released by Close")
	}
}

// fuzzSize maps a class and a 16-bit value to a request size: tiny (up to
// 4 KiB), small (up to 1 MiB), medium (1 to 4 MiB) or large (10 to 14 MiB).
func fuzzSize(class byte, v int64) int64 {
	switch class {
	case 0:
		return 1 + v%4096
	case 1:
		return 1 + v*16
	case 2:
		return MiB + 1 + v*48
	default:
		return 10*MiB + v*64
	}
}

// checkPool verifies the pool's structure and statistics against the blocks
// the caller holds and the regions the backend handed out. It runs after
// every fuzzed step, so it checks with plain comparisons (testify's helpers
// walk the stack on every call) and fails with the first broken invariant.
func checkPool(t *testing.T, p *memory.Pool, fb *memtest.FaultBackend, cfg memory.PoolConfig, live []fuzzLive) {
	if err := poolInvariants(p, fb, cfg, live); err != nil {
		t.Fatal(err)
	}
}

func poolInvariants(p *memory.Pool, fb *memtest.FaultBackend, cfg memory.PoolConfig, live []fuzzLive) error {
	want := make(map[uintptr]int64, len(live))
	for _, l := range live {
		want[l.b.Addr()] = l.b.Size()
	}
	segs := p.Segments()
	sort.Slice(segs, func(i, j int) bool { return segs[i].Addr < segs[j].Addr })
	var allocated, requested, reserved, inactive, pending int64
	nlive := 0
	for i, s := range segs {
		if i > 0 && segs[i-1].Addr+uintptr(segs[i-1].Size) > s.Addr {
			return fmt.Errorf("segments at %#x and %#x overlap", segs[i-1].Addr, s.Addr)
		}
		if s.Small && s.Size != memory.SmallBuffer {
			return fmt.Errorf("small segment of %d bytes", s.Size)
		}
		reserved += s.Size
		addr, free, anyLive := s.Addr, int64(0), false
		for j, b := range s.Blocks {
			switch {
			case b.Addr != addr:
				return fmt.Errorf("segment %#x: block %d at %#x, want %#x: blocks must tile their segment", s.Addr, j, b.Addr, addr)
			case b.Size <= 0 || b.Size%memory.MinBlockSize != 0:
				return fmt.Errorf("segment %#x: block %d has size %d", s.Addr, j, b.Size)
			case b.Live && (b.Requested <= 0 || memory.RoundSize(b.Requested) > b.Size):
				return fmt.Errorf("segment %#x: live block %d of %d bytes holds a request of %d", s.Addr, j, b.Size, b.Requested)
			case b.Live && b.Pending:
				return fmt.Errorf("segment %#x: block %d is both live and pending", s.Addr, j)
			case !b.Live && b.Requested != 0:
				return fmt.Errorf("segment %#x: free block %d has a request of %d", s.Addr, j, b.Requested)
			case isFree(b) && j > 0 && isFree(s.Blocks[j-1]):
				return fmt.Errorf("segment %#x: free blocks %d and %d were not merged", s.Addr, j-1, j)
			case !b.Live && cfg.MaxSplitSize > 0 && b.Size > cfg.MaxSplitSize && len(s.Blocks) > 1:
				return fmt.Errorf("segment %#x: an oversize block of %d bytes was split", s.Addr, b.Size)
			}
			if b.Live {
				allocated += b.Size
				requested += b.Requested
				if want[b.Addr] != b.Requested {
					return fmt.Errorf("live block at %#x of %d bytes is not one the caller holds (%d)", b.Addr, b.Requested, want[b.Addr])
				}
				nlive++
				anyLive = true
			} else if b.Pending {
				pending += b.Size
				anyLive = true
			} else {
				free += b.Size
			}
			addr += uintptr(b.Size)
		}
		if addr != s.Addr+uintptr(s.Size) {
			return fmt.Errorf("segment %#x of %d bytes: blocks end at %#x", s.Addr, s.Size, addr)
		}
		if anyLive {
			inactive += free
		}
	}
	if nlive != len(want) {
		return fmt.Errorf("the pool has %d live blocks, the caller %d", nlive, len(want))
	}

	u := p.Stats()
	_, backendBytes := fb.Live()
	allocs, frees := fb.Calls()
	for _, c := range []struct {
		name      string
		got, want int64
	}{
		{"allocated", u.Allocated.Current, allocated},
		{"requested", u.Requested.Current, requested},
		{"reserved", u.Reserved.Current, reserved},
		{"reserved vs the backend's live bytes", u.Reserved.Current, backendBytes},
		{"active", u.Active.Current, u.Allocated.Current + pending},
		{"inactive split", u.InactiveSplit.Current, inactive},
		{"allocs - frees", u.Allocs - u.Frees, int64(len(live))},
		{"backend allocs", u.BackendAllocs, int64(allocs)},
		{"backend frees", u.BackendFrees, int64(frees)},
	} {
		if c.got != c.want {
			return fmt.Errorf("statistics: %s is %d, want %d", c.name, c.got, c.want)
		}
	}
	for _, s := range []memory.Stat{u.Allocated, u.Requested, u.Reserved, u.Active, u.InactiveSplit} {
		if s.Peak < s.Current {
			return fmt.Errorf("statistics: peak below current in %+v", u)
		}
	}
	if u.Reserved.Peak < u.Allocated.Peak {
		return fmt.Errorf("statistics: reserved peak %d below allocated peak %d", u.Reserved.Peak, u.Allocated.Peak)
	}
	if cfg.Limit > 0 && u.Reserved.Peak > cfg.Limit {
		return fmt.Errorf("reserved peak %d passed the limit %d", u.Reserved.Peak, cfg.Limit)
	}
	return nil
}

// isFree reports whether a snapshot block is free: neither live nor
// waiting for other streams' work.
func isFree(b memory.BlockInfo) bool { return !b.Live && !b.Pending }
