package memory_test

import (
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/memory"
)

var (
	pairWindows = flag.Int("pair-windows", 0, "TestPairWindows: time this many windows of 5000 pairs per workload")
	pairLive    = flag.Int("pair-live", 256, "TestPairWindows: live blocks of the mixed workload")
	pairMax     = flag.Int64("pair-max", 32<<20, "TestPairWindows: largest size of the mixed workload")
	pairSeq     = flag.Int("pair-seq", 1<<16, "TestPairWindows: length of the mixed workload's repeating sequence (a power of two)")
	pairMixed   = flag.Bool("pair-mixed", false, "TestPairWindows: time the mixed workload only")
	pairChurn   = flag.Int("pair-churn", 0, "TestMixedChurn: replacements of the mixed workload to run")
	pairExpand  = flag.Bool("pair-expandable", false, "TestPairWindows: pools of expandable segments (the GPU's default) instead of classic ones")
)

// TestPairWindows times BenchmarkPoolPair's loops in windows of 5000 pairs
// and prints the fastest and the median window of each workload: on a
// shared, noisy machine the minimum is the steadier figure. Skipped
// without -pair-windows N:
//
//	go test -c -o /tmp/pool.test ./memory
//	/tmp/pool.test -test.run TestPairWindows -pair-windows 300
//
// -pair-live, -pair-max and -pair-seq change the mixed workload (fewer
// live blocks, smaller sizes, a short repeating sequence), which takes it
// apart: with 8 live blocks below 64 KiB everything stays in the
// first-level cache, and a sequence of 16 pairs makes every branch
// predictable (bench/results/cpu-pool-pair-2026-12-02-b.md).
func TestPairWindows(t *testing.T) {
	if *pairWindows <= 0 {
		t.Skip("no -pair-windows")
	}
	const window = 5000
	report := func(name string, ns []float64) {
		slices.Sort(ns)
		fmt.Printf("pair-windows %-6s min %6.1f  p10 %6.1f  median %6.1f ns/pair (%d windows of %d)\n",
			name, ns[0], ns[len(ns)/10], ns[len(ns)/2], len(ns), window)
	}
	for _, size := range []int64{4 << 10, 1 << 20, 64 << 20} {
		if *pairMixed {
			break
		}
		p := memory.NewPool(memory.NewHostBackend(memory.TierHost), memory.PoolConfig{Expandable: *pairExpand})
		var ns []float64
		for w := 0; w <= *pairWindows; w++ {
			start := time.Now()
			for range window {
				blk, err := p.Alloc(size, 0)
				if err != nil {
					t.Fatal(err)
				}
				if err := p.Free(blk); err != nil {
					t.Fatal(err)
				}
			}
			if w > 0 {
				ns = append(ns, float64(time.Since(start).Nanoseconds())/window)
			}
		}
		require.NoError(t, p.Close())
		report(memory.FormatBytes(size), ns)
	}
	nsizes := *pairSeq
	require.True(t, nsizes > 0 && nsizes&(nsizes-1) == 0, "-pair-seq must be a power of two")
	mask := nsizes - 1 // i%nsizes would divide, costing the harness more than a pool call
	live := *pairLive
	rng := rand.New(rand.NewPCG(1, 2))
	sizes := make([]int64, nsizes)
	slots := make([]int, nsizes)
	lo, hi := math.Log(512), math.Log(float64(*pairMax))
	for i := range sizes {
		sizes[i] = int64(math.Exp(lo + rng.Float64()*(hi-lo)))
		slots[i] = rng.IntN(live)
	}
	p := memory.NewPool(memory.NewHostBackend(memory.TierHost), memory.PoolConfig{Expandable: *pairExpand})
	blocks := make([]*memory.Block, live)
	i := 0
	step := func() {
		s := slots[i&mask]
		if blocks[s] != nil {
			if err := p.Free(blocks[s]); err != nil {
				t.Fatal(err)
			}
		}
		blk, err := p.Alloc(sizes[i&mask], 0)
		if err != nil {
			t.Fatal(err)
		}
		blocks[s] = blk
		i++
	}
	for range nsizes {
		step()
	}
	before := p.Stats()
	var ns []float64
	for range *pairWindows {
		start := time.Now()
		for range window {
			step()
		}
		ns = append(ns, float64(time.Since(start).Nanoseconds())/window)
	}
	report("mixed", ns)
	st := p.Stats()
	pairs := float64(*pairWindows * window)
	fmt.Printf("pair-windows mixed  backend calls a pair in the timed windows: %.4f allocs, %.4f frees, %.4f pages mapped, %.4f unmapped, %.4f syncs\n",
		float64(st.BackendAllocs-before.BackendAllocs)/pairs, float64(st.BackendFrees-before.BackendFrees)/pairs,
		float64(st.PagesMapped-before.PagesMapped)/pairs, float64(st.PagesUnmapped-before.PagesUnmapped)/pairs, float64(st.Syncs-before.Syncs)/pairs)
	for _, blk := range blocks {
		if blk != nil {
			require.NoError(t, p.Free(blk))
		}
	}
	require.NoError(t, p.Close())
}

// TestMixedChurn runs the mixed workload (256 live blocks, 512 B-32 MiB)
// for -pair-churn replacements on a classic pool and on an expandable one,
// and prints each one's peak reserved over peak allocated bytes and the
// pages it mapped and created a replacement in the second half: the
// price in memory and in page mappings of a workload that never repeats
// (pool_expand_churn.go). Skipped without -pair-churn N:
//
//	go test -run TestMixedChurn ./memory -args -pair-churn 2000000
func TestMixedChurn(t *testing.T) {
	if *pairChurn <= 0 {
		t.Skip("no -pair-churn")
	}
	for _, expandable := range []bool{false, true} {
		rng := rand.New(rand.NewPCG(1, 2))
		p := memory.NewPool(memory.NewHostBackend(memory.TierHost), memory.PoolConfig{Expandable: expandable})
		blocks := make([]*memory.Block, 256)
		memory.MixedWorkload(t, p, blocks, rng, *pairChurn/2, 32<<20)
		st := p.Stats()
		maps, creates := st.PagesMapped, st.BackendAllocs
		memory.MixedWorkload(t, p, blocks, rng, *pairChurn-*pairChurn/2, 32<<20)
		st = p.Stats()
		half := float64(*pairChurn - *pairChurn/2)
		fmt.Printf("mixed churn, expandable %-5v: peak reserved / peak allocated %.4f (%s / %s); second half: %.5f pages mapped, %.5f created a replacement\n",
			expandable, float64(st.Reserved.Peak)/float64(st.Allocated.Peak), memory.FormatBytes(st.Reserved.Peak), memory.FormatBytes(st.Allocated.Peak),
			float64(st.PagesMapped-maps)/half, float64(st.BackendAllocs-creates)/half)
		for _, b := range blocks {
			require.NoError(t, p.Free(b))
		}
		require.NoError(t, p.Close())
	}
}
