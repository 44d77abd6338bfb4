package memory

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// checkExpandable verifies the invariants of a pool's expandable segments:
// blocks tile each segment in address order; free blocks are coalesced;
// holes are page-aligned with nothing mapped; free, live, pending and
// stale blocks sit on mapped pages; no two places own the same byte of a
// physical page (a page may be mapped at several places, each owning the
// bytes of its free, live and pending blocks on it: live blocks never
// overlap physically); each mapped physical page is counted at exactly
// one place, which owns some of its bytes; the stale (uncounted) and
// mapped (counted) byte counts and the reserved statistic agree with the
// pages.
func checkExpandable(t testing.TB, p *Pool) {
	t.Helper()
	counted := map[Page]string{}
	mappedAnywhere := map[Page]bool{}
	owned := map[Page][][2]int64{} // byte ranges of each physical page owned somewhere
	where := map[Page][]string{}
	var mapped, stale, tinyLive int64
	g := p.page
	for seg := p.segs; seg != nil; seg = seg.next {
		if seg.x == nil {
			continue
		}
		base := seg.region.Addr
		page := func(i int64) Page {
			if i < int64(len(seg.x.pages)) {
				return seg.x.pages[i]
			}
			return 0
		}
		ownsSome := map[int64]bool{}
		var pos int64
		var segMapped int64
		var prev *Block
		for b := seg.first; b != nil; b = b.next {
			at := fmt.Sprintf("segment %#x, block at +%d (%d bytes, state %d)", base, pos, b.size, b.state)
			if b.addr != base+uintptr(pos) || b.prev != prev || b.seg != seg {
				require.Fail(t, "blocks do not tile the segment", at)
			}
			if prev != nil && prev.state == b.state && b.state != blockLive && b.state != blockPending {
				require.Fail(t, "not merged with its neighbour", at)
			}
			lo, hi := pos/g, (pos+b.size+g-1)/g
			if b.state == blockHole {
				require.Zero(t, pos%g, at)
				require.Zero(t, b.size%g, at)
				for i := lo; i < hi && i < int64(len(seg.x.pages)); i++ {
					if page(i) != 0 {
						require.Zero(t, page(i), "%s: page %d of a hole is mapped", at, i)
					}
				}
			} else {
				for i := lo; i < hi; i++ {
					pg := page(i)
					if pg == 0 {
						require.Fail(t, "a block's page is unmapped", "%s: page %d", at, i)
					}
					if b.state == blockStale {
						continue
					}
					ownsSome[i] = true
					l, h := max(pos, i*g)-i*g, min(pos+b.size, (i+1)*g)-i*g
					for _, r := range owned[pg] {
						if l < r[1] && r[0] < h {
							require.Fail(t, "two places own the same bytes of a physical page",
								"%s: bytes [%d, %d) of page %d, owned by %v", at, l, h, pg, where[pg])
						}
					}
					owned[pg] = append(owned[pg], [2]int64{l, h})
					where[pg] = append(where[pg], fmt.Sprintf("%#x+%d", base, pos))
				}
			}
			pos += b.size
			prev = b
		}
		require.Equal(t, seg.region.Size, pos, "blocks tile the segment")
		tiny := map[int64]int32{}
		for b := seg.first; b != nil; b = b.next {
			if b.state == blockLive && b.size <= p.tinyMax {
				tiny[int64(b.addr-base)/g]++
			}
		}
		for i, n := range seg.x.tiny {
			require.Equal(t, tiny[int64(i)], n, "segment %#x: live tiny blocks in page %d", base, i)
			delete(tiny, int64(i))
			tinyLive += int64(n)
		}
		require.Empty(t, tiny, "segment %#x: live tiny blocks in pages beyond the counts", base)
		for i, pg := range seg.x.pages {
			if pg == 0 {
				continue
			}
			mappedAnywhere[pg] = true
			if i < len(seg.x.stale) && seg.x.stale[i] {
				stale += g
				continue
			}
			at := fmt.Sprintf("segment %#x page %d", base, i)
			if other, dup := counted[pg]; dup {
				require.Fail(t, "a page counted twice", "%s: page %d also counted at %s", at, pg, other)
			}
			if !ownsSome[int64(i)] {
				require.Fail(t, "a page counted where it owns no bytes", at)
			}
			counted[pg] = at
			segMapped += g
		}
		require.Equal(t, segMapped, seg.mapped, "segment %#x: mapped bytes", base)
		mapped += segMapped
	}
	for pg := range mappedAnywhere {
		if _, ok := counted[pg]; !ok {
			require.Fail(t, "a mapped page counted nowhere", "page %d", pg)
		}
	}
	require.Equal(t, stale, p.staleBytes, "stale bytes")
	require.Equal(t, tinyLive, p.tinyLive, "live tiny blocks counted in pages")
	var classic int64
	for seg := p.segs; seg != nil; seg = seg.next {
		if seg.x == nil {
			classic += seg.region.Size
		}
	}
	require.Equal(t, mapped+classic, p.sinks.own.Reserved.Current, "reserved = pages counted + classic segments")
}

// TestExpandableInvariantsRandom runs random allocations and frees (and
// now and then EmptyCache) of sizes from 512 B to 64 MiB, on two streams
// for odd seeds and under a limit for the last seeds, through an
// expandable pool over host memory, checking every invariant and the
// data of every live block as it goes.
func TestExpandableInvariantsRandom(t *testing.T) {
	mark := func(b *Block, v byte) {
		h := b.Host()
		h[0], h[len(h)-1], h[len(h)/2] = v, v, v
	}
	marks := func(b *Block) [3]byte {
		h := b.Host()
		return [3]byte{h[0], h[len(h)-1], h[len(h)/2]}
	}
	runExpandableRandom(t, func() Backend { return NewHostBackend(TierDevice) }, 6, 1500, mark, marks)
}

// runExpandableRandom is TestExpandableInvariantsRandom's body over any
// VirtualMemory backend; mark writes a byte into a live block and marks
// reads it back at the same places.
func runExpandableRandom(t *testing.T, newBackend func() Backend, seeds uint64, steps int, mark func(*Block, byte), marks func(*Block) [3]byte) {
	for seed := range seeds {
		rng := rand.New(rand.NewPCG(seed, 99))
		cfg := PoolConfig{Expandable: true}
		if seed >= seeds/2 {
			cfg.Limit = 384 << 20 // allocations fail now and then, after stealing
		}
		p := NewPool(newBackend(), cfg)
		ooms := 0
		type liveBlock struct {
			b    *Block
			fill byte
		}
		var live []liveBlock
		lo, hi := math.Log(512), math.Log(64<<20)
		for step := range steps {
			switch r := rng.IntN(100); {
			case r < 52 || len(live) == 0:
				size := int64(math.Exp(lo + rng.Float64()*(hi-lo)))
				s := Stream(0)
				if seed%2 == 1 && rng.IntN(4) == 0 {
					s = 7
				}
				b, err := p.Alloc(size, s)
				if cfg.Limit > 0 && errors.Is(err, ErrOutOfMemory) {
					ooms++
					break
				}
				require.NoError(t, err, "seed %d step %d", seed, step)
				fill := byte(rng.Uint32())
				mark(b, fill)
				live = append(live, liveBlock{b, fill})
			case r < 98:
				i := rng.IntN(len(live))
				f := live[i].fill
				require.Equal(t, [3]byte{f, f, f}, marks(live[i].b), "seed %d step %d: data kept", seed, step)
				require.NoError(t, p.Free(live[i].b))
				live[i] = live[len(live)-1]
				live = live[:len(live)-1]
			default:
				require.NoError(t, p.EmptyCache())
			}
			p.mu.Lock()
			checkExpandable(t, p)
			p.mu.Unlock()
		}
		if cfg.Limit > 0 {
			require.Positive(t, ooms, "seed %d: the limit was reached", seed)
			require.LessOrEqual(t, p.Stats().Reserved.Peak, cfg.Limit)
		}
		for _, l := range live {
			require.NoError(t, p.Free(l.b))
		}
		require.NoError(t, p.EmptyCache())
		st := p.Stats()
		require.Zero(t, st.Reserved.Current, "seed %d: EmptyCache with nothing live gives everything back", seed)
		require.Zero(t, p.nsegs)
		require.NoError(t, p.Close())
	}
}

// TestExpandableTraceInvariants replays the shared PyTorch traces through
// an expandable pool, checking the invariants after every call.
func TestExpandableTraceInvariants(t *testing.T) {
	for _, name := range []string{"trace-char-fp32.csv", "trace-char-fp16-ckpt.csv"} {
		data, err := os.ReadFile(filepath.Join("..", "bench", "traces", name))
		if err != nil {
			t.Skip(err)
		}
		p := NewPool(NewHostBackend(TierDevice), PoolConfig{Expandable: true})
		live := map[string]*Block{}
		for i, line := range strings.Split(strings.TrimSpace(string(data)), "\n")[1:] {
			f := strings.Split(line, ",")
			switch f[0] {
			case "alloc":
				n, _ := strconv.ParseInt(f[2], 10, 64)
				b, err := p.Alloc(n, 0)
				require.NoError(t, err, "%s:%d", name, i+2)
				live[f[1]] = b
			case "free_completed":
				if b := live[f[1]]; b != nil {
					require.NoError(t, p.Free(b), "%s:%d", name, i+2)
					delete(live, f[1])
				}
			default:
				continue
			}
			if i%5 == 0 {
				p.mu.Lock()
				checkExpandable(t, p)
				p.mu.Unlock()
			}
		}
		for _, b := range live {
			require.NoError(t, p.Free(b))
		}
		require.NoError(t, p.Close(), name)
	}
}

// TestExpandableScaledTraces replays PyTorch's traces with every size
// scaled (bench-alloc -scale: models of other sizes with the same
// pattern) through expandable pools over the host backend, checking the
// invariants now and then, and bounds reserved/requested at 16 scales
// from 0.2 to 4 (0.2, 0.66 and 1.1 off the bench-alloc grid, against
// rules fitted to it), with and without step plans (PlanSteps). The goal
// (issue 12) is 1.02 at every scale; fp32 is there without plans, and so
// is the fp16 trace with checkpointing at 0.5, at 1 and from 1.25 up, but
// not at the other scales below 1.25 (free bytes in partial pages at the
// peak: pages pinned by blocks under 1 MiB, and the partial edge pages of
// large blocks whose neighbours died). With step plans (and small
// requests at the top of the range while no plan runs) the fp16 trace is
// under 1.02 at all of them but 0.2 (1.031) and 0.5 (1.0201: 1.0146
// before the plans counted the lives of blocks dying as a period ends,
// when 0.31 was at 1.025, now 1.016), and fp32 under 1.008. Scales off
// the goal are held to what the pool reaches today (2026-12-03; with
// plans 2026-12-06) plus a little, as a guard against regressions.
func TestExpandableScaledTraces(t *testing.T) {
	const goal = 1.02
	scales := []float64{0.2, 0.25, 0.31, 0.37, 0.43, 0.5, 0.62, 0.66, 0.75, 1, 1.1, 1.25, 1.5, 2.3, 3.1, 4}
	type key struct {
		name string
		plan bool
	}
	// The bounds above the goal; every other scale is held to the goal.
	bound := map[key]map[float64]float64{
		{"trace-char-fp32.csv", false}: {},
		{"trace-char-fp16-ckpt.csv", false}: {0.2: 1.148, 0.25: 1.098, 0.31: 1.075, 0.37: 1.098, 0.43: 1.094, 0.62: 1.057,
			0.66: 1.069, 0.75: 1.053, 1.1: 1.041},
		{"trace-char-fp32.csv", true}:      {},
		{"trace-char-fp16-ckpt.csv", true}: {0.2: 1.036, 0.5: 1.021},
	}
	for k, above := range bound {
		data, err := os.ReadFile(filepath.Join("..", "bench", "traces", k.name))
		if err != nil {
			t.Skip(err)
		}
		lines := strings.Split(strings.TrimSpace(string(data)), "\n")[1:]
		for _, scale := range scales {
			limit, ok := above[scale]
			if !ok {
				limit = goal
			}
			p := NewPool(NewHostBackend(TierDevice), PoolConfig{Expandable: true, PlanSteps: k.plan})
			live := map[string]*Block{}
			for i, line := range lines {
				f := strings.Split(line, ",")
				switch f[0] {
				case "alloc":
					n, _ := strconv.ParseInt(f[2], 10, 64)
					b, err := p.Alloc(max(1, int64(math.Round(float64(n)*scale))), 0)
					require.NoError(t, err, "%s x%v:%d", k.name, scale, i+2)
					live[f[1]] = b
				case "free_completed":
					if b := live[f[1]]; b != nil {
						require.NoError(t, p.Free(b))
						delete(live, f[1])
					}
				}
				if i%211 == 0 {
					p.mu.Lock()
					checkExpandable(t, p)
					p.mu.Unlock()
				}
			}
			st := p.Stats()
			ratio := float64(st.Reserved.Peak) / float64(st.Requested.Peak)
			t.Logf("%s x%v (plans %v): reserved/requested %.4f (bound %.3f)", k.name, scale, k.plan, ratio, limit)
			require.LessOrEqual(t, ratio, limit, "%s x%v (plans %v)", k.name, scale, k.plan)
			for _, b := range live {
				require.NoError(t, p.Free(b))
			}
			require.NoError(t, p.Close())
		}
	}
}

// TestExpandableTinyCounts checks the count of live tiny blocks per page
// (pool_expand_tiny.go) through random work dominated by tiny requests,
// with and without a MaxSplitSize (a tiny request may then be handed a
// whole block above it, which is not a tiny block), on two streams, with
// EmptyCache now and then.
func TestExpandableTinyCounts(t *testing.T) {
	for _, maxSplit := range []int64{0, 24 << 20} {
		rng := rand.New(rand.NewPCG(uint64(maxSplit), 5))
		p := NewPool(NewHostBackend(TierDevice), PoolConfig{Expandable: true, MaxSplitSize: maxSplit})
		// A tiny request when the only free block is above MaxSplitSize.
		keep, err := p.Alloc(1000, 0)
		require.NoError(t, err)
		big, err := p.Alloc(40<<20, 0)
		require.NoError(t, err)
		require.NoError(t, p.Free(big))
		live := []*Block{keep}
		for step := range 3000 {
			switch r := rng.IntN(100); {
			case r < 55 || len(live) == 0:
				size := int64(1 + rng.IntN(tinySize+1024))
				if rng.IntN(8) == 0 {
					size = int64(1+rng.IntN(40)) << 20
				}
				b, err := p.Alloc(size, Stream(rng.IntN(2)))
				require.NoError(t, err, "step %d", step)
				live = append(live, b)
			case r < 99:
				i := rng.IntN(len(live))
				require.NoError(t, p.Free(live[i]))
				live[i] = live[len(live)-1]
				live = live[:len(live)-1]
			default:
				require.NoError(t, p.EmptyCache())
			}
			p.mu.Lock()
			checkExpandable(t, p)
			p.mu.Unlock()
		}
		for _, b := range live {
			require.NoError(t, p.Free(b))
		}
		p.mu.Lock()
		checkExpandable(t, p)
		p.mu.Unlock()
		require.NoError(t, p.Close())
	}
}
