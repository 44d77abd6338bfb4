package memory

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestMigrateOnExpandableOffload runs training steps with activation
// offload through a manager whose device pool has expandable segments and
// a budget: the forward pass allocates activations of 24 to 100 MiB on the
// compute stream, with temporaries around them, and moves most of them to
// the staging tier on a copy stream (MigrateOn); the backward pass moves
// them back, the copy stream's events completing late. Every block
// MigrateOn brings to the device must be wholly mapped, on pages of its
// own, and the device pool keeps its invariants.
func TestMigrateOnExpandableOffload(t *testing.T) {
	const compute, copy = Stream(1), Stream(2)
	for seed := range uint64(4) {
		rng := rand.New(rand.NewPCG(seed, 0x0ff))
		ss := newLateSync()
		var limits [NumTiers]int64
		limits[TierDevice] = int64(700+rng.IntN(300)) << 20
		m := NewHostManager(Config{StreamSync: ss, Segments: SegmentsExpandable, Limits: limits})
		dev := m.pools[TierDevice]
		require.True(t, dev.Expandable())
		// The copy checks what the driver does: both ranges mapped.
		copies := 0
		m.copyFn = func(dst, src uintptr, n int64, s Stream) error {
			copies++
			for _, a := range [2]uintptr{dst, src} {
				if seg := segmentAt(dev, a); seg != nil {
					for off := int64(a-seg.region.Addr) / dev.page * dev.page; off < int64(a-seg.region.Addr)+n; off += dev.page {
						i := off / dev.page
						if i >= int64(len(seg.x.pages)) || seg.x.pages[i] == 0 || i < int64(len(seg.x.stale)) && seg.x.stale[i] {
							return fmt.Errorf("copy of %d bytes at %#x on stream %d: page %d unmapped or stale", n, a, s, i)
						}
					}
				}
			}
			return nil
		}
		check := func(a *Allocation, at string) {
			t.Helper()
			m.mu.Lock()
			defer m.mu.Unlock()
			if a != nil && a.tier == TierDevice {
				checkBlockMapped(t, dev, a.b, RoundSize(a.size), at)
			}
			checkExpandable(t, dev)
		}
		for step := range 6 {
			var acts []*Allocation
			for layer := range 12 {
				at := fmt.Sprintf("seed %d step %d forward %d", seed, step, layer)
				a, err := m.AllocStream(24<<20+rng.Int64N(76<<20), RoleActivation, compute)
				require.NoError(t, err, at)
				check(a, at)
				tmp, err := m.AllocStream(1+rng.Int64N(100<<20), RoleActivation, compute)
				require.NoError(t, err, at)
				check(tmp, at)
				if rng.IntN(4) > 0 {
					require.NoError(t, m.MigrateOn(a, TierStaging, copy), at)
				}
				require.NoError(t, tmp.Free())
				acts = append(acts, a)
				if rng.IntN(3) == 0 {
					ss.complete(rng, Stream(1+rng.IntN(2)))
				}
			}
			for layer := len(acts) - 1; layer >= 0; layer-- {
				at := fmt.Sprintf("seed %d step %d backward %d", seed, step, layer)
				a := acts[layer]
				if a.tier != TierDevice {
					err := m.MigrateOn(a, TierDevice, copy)
					if errors.Is(err, ErrOutOfMemory) {
						ss.complete(rng, copy)
						err = m.MigrateOn(a, TierDevice, copy)
					}
					require.NoError(t, err, at)
					check(a, at)
				}
				grad, err := m.AllocStream(1+rng.Int64N(100<<20), RoleActivation, compute)
				require.NoError(t, err, at)
				check(grad, at)
				require.NoError(t, grad.Free())
				require.NoError(t, a.Free())
				if rng.IntN(3) == 0 {
					ss.complete(rng, Stream(1+rng.IntN(2)))
				}
			}
		}
		ss.complete(rng, compute)
		require.NoError(t, m.Close())
		require.Positive(t, copies)
		t.Logf("seed %d: %d copies; host waits %d, device waits %d", seed, copies, ss.waits, ss.onStream)
	}
}

// segmentAt returns the expandable segment of p holding address a, or nil.
func segmentAt(p *Pool, a uintptr) *segment {
	for seg := p.segs; seg != nil; seg = seg.next {
		if seg.x != nil && a >= seg.region.Addr && a < seg.region.Addr+uintptr(seg.region.Size) {
			return seg
		}
	}
	return nil
}
