package memory

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// lateSync is a StreamSync (and StreamWaiter) whose streams finish their
// work only when the test says so (complete) or a pool waits on the host;
// a wait on the device completes nothing. It counts the calls, so that a
// test can tell which of the limit's paths it took.
type lateSync struct {
	next     StreamEvent
	open     map[StreamEvent][2]uint64 // stream, sequence number
	recorded map[Stream]uint64
	done     map[Stream]uint64
	waits    int // host waits (Wait)
	onStream int // device waits (WaitOnStream)
}

func newLateSync() *lateSync {
	return &lateSync{open: map[StreamEvent][2]uint64{}, recorded: map[Stream]uint64{}, done: map[Stream]uint64{}}
}

func (f *lateSync) RecordEvent(s Stream) (StreamEvent, error) {
	f.recorded[s]++
	f.next++
	f.open[f.next] = [2]uint64{uint64(s), f.recorded[s]}
	return f.next, nil
}

func (f *lateSync) Done(ev StreamEvent) bool {
	e := f.open[ev]
	return f.done[Stream(e[0])] >= e[1]
}

func (f *lateSync) Wait(ev StreamEvent) error {
	f.waits++
	e := f.open[ev]
	f.done[Stream(e[0])] = max(f.done[Stream(e[0])], e[1])
	return nil
}

func (f *lateSync) WaitOnStream(Stream, StreamEvent) error { f.onStream++; return nil }

func (f *lateSync) Release(ev StreamEvent) { delete(f.open, ev) }

// complete finishes some of the work queued on s: up to a random event
// recorded so far.
func (f *lateSync) complete(rng *rand.Rand, s Stream) {
	if n := f.recorded[s] - f.done[s]; n > 0 {
		f.done[s] += 1 + rng.Uint64N(n)
	}
}

// checkBlockMapped verifies that a block just handed out covers rounded
// bytes and that every page under it is mapped here, not stale (lent
// elsewhere), and holds no byte of another live or pending block.
func checkBlockMapped(t testing.TB, p *Pool, b *Block, rounded int64, at string) {
	t.Helper()
	require.Equal(t, blockLive, b.state, at)
	require.GreaterOrEqual(t, b.size, rounded, "%s: the block covers the request", at)
	seg := b.seg
	if seg.x == nil {
		return
	}
	g := p.page
	off := b.offset()
	for i := off / g; i < (off+b.size+g-1)/g; i++ {
		require.Less(t, i, int64(len(seg.x.pages)), "%s: page %d beyond the mapped range", at, i)
		require.NotZero(t, seg.x.pages[i], "%s: page %d of the block is not mapped", at, i)
		if i < int64(len(seg.x.stale)) {
			require.False(t, seg.x.stale[i], "%s: page %d of the block is lent elsewhere", at, i)
		}
	}
	// The block's physical pages, with the bytes of each it uses.
	mine := map[Page][2]int64{}
	for i := off / g; i < (off+b.size+g-1)/g; i++ {
		mine[seg.x.pages[i]] = [2]int64{max(off, i*g) - i*g, min(off+b.size, (i+1)*g) - i*g}
	}
	for s := p.segs; s != nil; s = s.next {
		if s.x == nil {
			continue
		}
		for o := s.first; o != nil; o = o.next {
			if o == b || o.state != blockLive && o.state != blockPending {
				continue
			}
			ooff := o.offset()
			for i := ooff / g; i < (ooff+o.size+g-1)/g; i++ {
				r, ok := mine[s.x.pages[i]]
				l, h := max(ooff, i*g)-i*g, min(ooff+o.size, (i+1)*g)-i*g
				if ok && l < r[1] && r[0] < h {
					require.Fail(t, "a live block shares physical memory with another", "%s: page %d of segment %#x (block at +%d, state %d)",
						at, s.x.pages[i], s.region.Addr, ooff, o.state)
				}
			}
		}
	}
}

// TestExpandableTwoStreamsAtLimit drives an expandable pool at its limit
// as activation offload does (Manager.MigrateOn): stream 1 computes,
// allocating and freeing blocks of 1 to 100 MiB; moves allocate on stream
// 2, record the new block as used on stream 1 and the old one as used on
// stream 2 before freeing it, so that blocks of both streams wait for the
// other's events, which complete late. At the limit the pool reuses them
// (reclaimOnStream, waitFor) and steals pages (lending on its own stream,
// unmapping others', sweeping stale ranges). After every allocation the
// block must be wholly mapped, on pages of its own; every step keeps the
// invariants (checkExpandable) and the data of live blocks.
func TestExpandableTwoStreamsAtLimit(t *testing.T) {
	var sum streamsRun
	for seed := range uint64(6) {
		sum.add(runStreamsAtLimit(t, seed, 1000))
	}
	t.Logf("host waits %d, device waits %d, OOMs %d, steps with stale pages %d", sum.waits, sum.onStream, sum.ooms, sum.stale)
	require.Positive(t, sum.waits, "waitFor ran")
	require.Positive(t, sum.onStream, "reclaimOnStream ran")
	require.Positive(t, sum.stale, "pages were lent")
}

// streamsRun counts what a run of runStreamsAtLimit went through.
type streamsRun struct{ waits, onStream, ooms, stale int }

func (r *streamsRun) add(o streamsRun) {
	r.waits += o.waits
	r.onStream += o.onStream
	r.ooms += o.ooms
	r.stale += o.stale
}

// runStreamsAtLimit is TestExpandableTwoStreamsAtLimit's run of one seed:
// odd seeds run out of device pages below the limit, every third has a
// MaxSplitSize.
func runStreamsAtLimit(t *testing.T, seed uint64, steps int) streamsRun {
	const compute, copy = Stream(1), Stream(2)
	var run streamsRun
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	ss := newLateSync()
	vm := newStrictVM(NewHostBackend(TierDevice).(VirtualMemory))
	limit := int64(600+rng.IntN(400)) << 20
	if seed%2 == 1 {
		vm.capacity = int(limit/HostPageSize) - 20 - rng.IntN(100) // the device fills up first
	}
	cfg := PoolConfig{Expandable: true, StreamSync: ss, Limit: limit}
	if seed%3 == 2 {
		cfg.MaxSplitSize = 64 << 20
	}
	p := NewPool(vm, cfg)
	type liveBlock struct {
		b    *Block
		fill byte
	}
	var live []liveBlock
	size := func() int64 {
		switch rng.IntN(10) {
		case 0:
			return 1 + rng.Int64N(8<<10) // tiny
		case 1, 2:
			return 1 + rng.Int64N(2<<20) // small ones share pages
		}
		return 1<<20 + rng.Int64N(100<<20)
	}
	alloc := func(n int64, s Stream, at string) *Block {
		b, err := p.Alloc(n, s)
		if errors.Is(err, ErrOutOfMemory) {
			run.ooms++
			return nil
		}
		require.NoError(t, err, at)
		p.mu.Lock()
		checkBlockMapped(t, p, b, RoundSize(n), at)
		vm.checkDeviceMapped(t, p, b, at)
		p.mu.Unlock()
		return b
	}
	mark := func(b *Block, v byte) {
		h := b.Host()
		h[0], h[len(h)/2], h[len(h)-1] = v, v, v
	}
	for step := range steps {
		at := fmt.Sprintf("seed %d step %d", seed, step)
		switch r := rng.IntN(100); {
		case r < 35 || len(live) == 0: // compute allocates
			if b := alloc(size(), compute, at); b != nil {
				f := byte(rng.Uint32())
				mark(b, f)
				live = append(live, liveBlock{b, f})
			}
		case r < 50: // a move: the new block on the copy stream, the old one freed behind the copy
			i := rng.IntN(len(live))
			old := live[i]
			nb := alloc(old.b.requested, copy, at)
			if nb == nil {
				break
			}
			require.NoError(t, p.RecordStream(nb, compute)) // the allocation's home
			require.NoError(t, p.RecordStream(old.b, copy))
			mark(nb, old.fill)
			require.NoError(t, p.Free(old.b))
			live[i].b = nb
		case r < 85: // a free, on either stream
			i := rng.IntN(len(live))
			f := live[i].fill
			h := live[i].b.Host()
			require.Equal(t, [3]byte{f, f, f}, [3]byte{h[0], h[len(h)/2], h[len(h)-1]}, "%s: data kept", at)
			require.NoError(t, p.Free(live[i].b))
			live[i] = live[len(live)-1]
			live = live[:len(live)-1]
		case r < 99: // the streams' work goes on, late
			ss.complete(rng, Stream(1+rng.IntN(2)))
		default:
			require.NoError(t, p.EmptyCache())
		}
		p.mu.Lock()
		if p.staleBytes > 0 {
			run.stale++
		}
		checkExpandable(t, p)
		vm.checkAgrees(t, p, at)
		p.mu.Unlock()
	}
	for _, l := range live {
		require.NoError(t, p.Free(l.b))
	}
	run.waits, run.onStream = ss.waits, ss.onStream
	require.LessOrEqual(t, p.Stats().Reserved.Peak, p.cfg.Limit)
	require.NoError(t, p.Close())
	require.NoError(t, vm.err)
	require.Empty(t, vm.places, "seed %d: every page released", seed)
	require.Empty(t, ss.open, "seed %d: every event released", seed)
	return run
}
