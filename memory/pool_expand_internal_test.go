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
// blocks tile each segment in address order; free blocks are coalesced
// and every page they touch is mapped and not stale; holes are
// page-aligned with nothing mapped; stale blocks are page-aligned with
// every page lent; live and pending blocks sit on mapped pages; each page
// is in use (mapped and not stale) at exactly one place; the mapped and
// stale byte counts and the reserved statistic agree with the pages.
func checkExpandable(t testing.TB, p *Pool) {
	t.Helper()
	inUse := map[Page]string{}
	var mapped, stale int64
	for seg := p.segs; seg != nil; seg = seg.next {
		if seg.x == nil {
			continue
		}
		base := seg.region.Addr
		isStale := func(i int) bool { return i < len(seg.x.stale) && seg.x.stale[i] }
		page := func(i int) Page {
			if i < len(seg.x.pages) {
				return seg.x.pages[i]
			}
			return 0
		}
		var pos int64
		var segMapped int64
		var prev *Block
		for b := seg.first; b != nil; b = b.next {
			where := fmt.Sprintf("segment %#x, block at +%d (%d bytes, state %d)", base, pos, b.size, b.state)
			if b.addr != base+uintptr(pos) || b.prev != prev || b.seg != seg {
				require.Fail(t, "blocks do not tile the segment", where)
			}
			lo, hi := int(pos/p.page), int((pos+b.size+p.page-1)/p.page)
			switch b.state {
			case blockHole, blockStale:
				require.Zero(t, pos%p.page, where)
				require.Zero(t, b.size%p.page, where)
				if prev != nil && prev.state == b.state {
					require.Fail(t, "not merged with its neighbour", where)
				}
				for i := lo; i < hi; i++ {
					if b.state == blockHole {
						if i >= len(seg.x.pages) {
							break // nothing was ever mapped beyond
						}
						if page(i) != 0 {
							require.Zero(t, page(i), "%s: page %d of a hole is mapped", where, i)
						}
					} else {
						if page(i) == 0 || !isStale(i) {
							require.Fail(t, "a stale block's page is unmapped or not stale", "%s: page %d", where, i)
						}
						stale += p.page
					}
				}
			default:
				if b.state == blockFree && prev != nil && prev.state == blockFree {
					require.Fail(t, "free next to free", where)
				}
				for i := lo; i < hi; i++ {
					if page(i) == 0 || isStale(i) {
						require.Fail(t, "a block's page is unmapped or stale", "%s: page %d", where, i)
					}
				}
			}
			pos += b.size
			prev = b
		}
		require.Equal(t, seg.region.Size, pos, "blocks tile the segment")
		for i, pg := range seg.x.pages {
			if pg == 0 || isStale(i) {
				continue
			}
			where := fmt.Sprintf("segment %#x page %d", base, i)
			if other, dup := inUse[pg]; dup {
				require.Fail(t, "a page in use twice", "%s: page %d also in use at %s", where, pg, other)
			}
			inUse[pg] = where
			segMapped += p.page
		}
		require.Equal(t, segMapped, seg.mapped, "segment %#x: mapped bytes", base)
		mapped += segMapped
	}
	require.Equal(t, stale, p.staleBytes, "stale bytes")
	var classic int64
	for seg := p.segs; seg != nil; seg = seg.next {
		if seg.x == nil {
			classic += seg.region.Size
		}
	}
	require.Equal(t, mapped+classic, p.sinks.own.Reserved.Current, "reserved = pages in use + classic segments")
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
