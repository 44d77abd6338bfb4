package memory

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestExpandableContents writes a stamp into every 4 KiB of each block an
// expandable pool hands out and checks the stamps at its free and, every
// 200 operations, in every live block: a pool that gave two live blocks
// the same bytes, by address or through one page mapped at two places
// (the host's pages have an identity on Linux, as a GPU's), would show
// there. Three streams whose events complete late, a device limit that
// makes growth take pages from free blocks and lend them, RecordStream,
// EmptyCache and sizes from 16 bytes to 40 MiB.
func TestExpandableContents(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("host pages have an identity on Linux only")
	}
	seeds, ops := uint64(3), 2000
	if n := contentSeeds; n > 0 {
		seeds, ops = n, 4000
	}
	for seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { expandableContents(t, seed, ops) })
	}
}

// contentSeeds, from STRATA_CONTENT_SEEDS, runs that many seeds of 4,000
// operations instead (a longer hunt).
var contentSeeds = func() uint64 {
	var n uint64
	fmt.Sscan(os.Getenv("STRATA_CONTENT_SEEDS"), &n)
	return n
}()

type stamped struct {
	a  *Allocation
	id uint64
	s  Stream
}

func stampAt(id uint64, off int) uint64 { return id<<32 | uint64(off/4096) }

func stamp(x stamped) {
	h := x.a.Host()
	for off := 0; off+16 <= len(h); off += 4096 { // clear of the last word
		binary.LittleEndian.PutUint64(h[off:], stampAt(x.id, off))
	}
	if n := len(h); n >= 8 {
		binary.LittleEndian.PutUint64(h[n-8:], ^x.id)
	}
}

func checkStamps(t *testing.T, x stamped, at string) {
	t.Helper()
	h := x.a.Host()
	for off := 0; off+16 <= len(h); off += 4096 {
		if got := binary.LittleEndian.Uint64(h[off:]); got != stampAt(x.id, off) {
			t.Fatalf("%s: block %d (%s at %#x, stream %d): stamp at byte %d is %#x, want %#x (block %d's)",
				at, x.id, FormatBytes(x.a.size), x.a.Addr(), x.s, off, got, stampAt(x.id, off), got>>32)
		}
	}
	if n := len(h); n >= 8 && binary.LittleEndian.Uint64(h[n-8:]) != ^x.id {
		t.Fatalf("%s: block %d (%s at %#x): its last word was overwritten", at, x.id, FormatBytes(x.a.size), x.a.Addr())
	}
}

func expandableContents(t *testing.T, seed uint64, ops int) {
	rng := rand.New(rand.NewPCG(seed, 0xc0de))
	ss := newLateSync()
	var limits [NumTiers]int64
	limits[TierDevice] = int64(256+rng.IntN(512)) << 20
	m := NewHostManager(Config{StreamSync: ss, Segments: SegmentsExpandable, Limits: limits})
	defer func() { require.NoError(t, m.Close()) }()
	require.True(t, m.pools[TierDevice].Expandable())
	streams := []Stream{1, 2, 3}
	var live []stamped
	next := uint64(1)
	size := func() int64 {
		switch r := rng.IntN(10); {
		case r < 3:
			return 16 + rng.Int64N(4096)
		case r < 7:
			return 4096 + rng.Int64N(1<<20)
		default:
			return 1<<20 + rng.Int64N(40<<20)
		}
	}
	for op := range ops {
		at := fmt.Sprintf("seed %d op %d", seed, op)
		switch r := rng.IntN(100); {
		case r < 55 || len(live) == 0:
			s := streams[rng.IntN(len(streams))]
			a, err := m.AllocStream(size(), RoleActivation, s)
			var oom *OOMError
			if errors.As(err, &oom) {
				continue
			}
			require.NoError(t, err, at)
			x := stamped{a: a, id: next, s: s}
			next++
			stamp(x)
			live = append(live, x)
		case r < 93:
			i := rng.IntN(len(live))
			x := live[i]
			checkStamps(t, x, at)
			if rng.IntN(8) == 0 {
				require.NoError(t, m.RecordStream(x.a, streams[rng.IntN(len(streams))]), at)
			}
			require.NoError(t, m.Free(x.a), at)
			live[i] = live[len(live)-1]
			live = live[:len(live)-1]
		case r < 95:
			require.NoError(t, m.EmptyCache(), at)
		default:
			for _, s := range streams {
				ss.complete(rng, s)
			}
		}
		if op%200 == 199 {
			for _, x := range live {
				checkStamps(t, x, at)
			}
		}
	}
	for _, x := range live {
		checkStamps(t, x, "end")
		require.NoError(t, m.Free(x.a))
	}
}
