package memory_test

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/memory/memtest"
)

// TestDeviceLimitNeverPassed: under a device limit, with everything in the
// device tier, reserved bytes never pass the limit, and an allocation
// refused with every byte free and the request under the limit is a bug.
func TestDeviceLimitNeverPassed(t *testing.T) {
	for seed := range uint64(30) {
		for _, mode := range []memory.SegmentMode{memory.SegmentsClassic, memory.SegmentsExpandable} {
			rng := rand.New(rand.NewPCG(seed, 99))
			const limit = 40 << 20
			ss := memtest.NewStreamSync()
			cfg := memory.Config{Segments: mode, Policy: memory.SingleTierPolicy(memory.TierDevice), StreamSync: ss}
			cfg.Limits[memory.TierDevice] = limit
			if seed%3 == 0 {
				cfg.MaxSplitSize = 24 << 20
			}
			m := memory.NewHostManager(cfg)
			var live []*memory.Allocation
			for step := range 400 {
				switch op := rng.IntN(10); {
				case op < 5:
					size := 1 + rng.Int64N(int64(1)<<(10+rng.IntN(15)))
					a, err := m.AllocStream(size, memory.RoleActivation, memory.Stream(rng.IntN(2)))
					if err != nil {
						if !errors.Is(err, memory.ErrOutOfMemory) {
							t.Fatal(err)
						}
						if len(live) == 0 && size <= 20<<20 {
							t.Fatalf("seed %d mode %d step %d: %d bytes refused with nothing live: %v", seed, mode, step, size, err)
						}
						break
					}
					if rng.IntN(4) == 0 {
						_ = m.RecordStream(a, 7)
					}
					live = append(live, a)
				case op < 9:
					if len(live) > 0 {
						i := rng.IntN(len(live))
						if err := live[i].Free(); err != nil {
							t.Fatal(err)
						}
						live[i] = live[len(live)-1]
						live = live[:len(live)-1]
					}
				default:
					ss.CompleteAll()
				}
				if r := m.Stats().Tiers[memory.TierDevice].Reserved.Current; r > limit {
					t.Fatalf("seed %d mode %d step %d: reserved %d > limit %d", seed, mode, step, r, limit)
				}
			}
			for _, a := range live {
				_ = a.Free()
			}
			ss.CompleteAll()
			m.Close()
		}
	}
}
