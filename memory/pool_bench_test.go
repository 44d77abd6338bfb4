package memory_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/memory"
)

// sinkAddr keeps the benchmarks' results alive.
var sinkAddr uintptr

// BenchmarkPoolPair measures one Alloc plus one Free on a warm cache, over
// the host backend. The mixed workload keeps 256 blocks of log-uniform
// sizes (512 B to 32 MiB) live and replaces a random one per pair, so the
// free trees hold a realistic spread of sizes.
func BenchmarkPoolPair(b *testing.B) {
	for _, c := range []struct {
		name string
		size int64
		cfg  memory.PoolConfig
	}{{"4KiB", 4 << 10, memory.PoolConfig{}}, {"1MiB", 1 << 20, memory.PoolConfig{}}, {"64MiB", 64 << 20, memory.PoolConfig{}},
		// A pool with step plans (a CUDA manager's device tier) sees the
		// fixed size repeat: a plan of 256 allocations, chained.
		{"64MiB-planned", 64 << 20, memory.PoolConfig{Expandable: true, PlanSteps: true}}} {
		b.Run(c.name, func(b *testing.B) {
			p := memory.NewPool(memory.NewHostBackend(memory.TierHost), c.cfg)
			defer func() { require.NoError(b, p.Close()) }()
			warm, err := p.Alloc(c.size, 0)
			require.NoError(b, err)
			require.NoError(b, p.Free(warm))
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				blk, err := p.Alloc(c.size, 0)
				if err != nil {
					b.Fatal(err)
				}
				sinkAddr += blk.Addr()
				if err := p.Free(blk); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/pair")
		})
	}
	for _, c := range []struct {
		name string
		cfg  memory.PoolConfig
	}{{"mixed", memory.PoolConfig{}}, {"mixed-expandable", memory.PoolConfig{Expandable: true}},
		{"mixed-planned", memory.PoolConfig{Expandable: true, PlanSteps: true}}} {
		b.Run(c.name, func(b *testing.B) { benchMixedPair(b, c.cfg) })
	}
}

// benchMixedPair is BenchmarkPoolPair's mixed workload on a pool of cfg.
func benchMixedPair(b *testing.B, cfg memory.PoolConfig) {
	{
		const live, nsizes = 256, 1 << 16
		rng := rand.New(rand.NewPCG(1, 2))
		sizes := make([]int64, nsizes)
		slots := make([]int, nsizes)
		lo, hi := math.Log(512), math.Log(32<<20)
		for i := range sizes {
			sizes[i] = int64(math.Exp(lo + rng.Float64()*(hi-lo)))
			slots[i] = rng.IntN(live)
		}
		p := memory.NewPool(memory.NewHostBackend(memory.TierHost), cfg)
		defer func() { require.NoError(b, p.Close()) }()
		blocks := make([]*memory.Block, live)
		step := func(i int) {
			s := slots[i%nsizes]
			if blocks[s] != nil {
				if err := p.Free(blocks[s]); err != nil {
					b.Fatal(err)
				}
			}
			blk, err := p.Alloc(sizes[i%nsizes], 0)
			if err != nil {
				b.Fatal(err)
			}
			blocks[s] = blk
		}
		for i := range nsizes { // warm the cache: every size seen once
			step(i)
		}
		before := p.Stats().BackendAllocs
		b.ReportAllocs()
		b.ResetTimer()
		i := 0
		for b.Loop() {
			step(i)
			i++
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/pair")
		st := p.Stats()
		b.ReportMetric(float64(st.BackendAllocs-before)/float64(b.N), "backend-allocs/pair")
		b.ReportMetric(float64(st.Reserved.Peak)/float64(st.Allocated.Peak), "reserved/allocated")
		for _, blk := range blocks {
			if blk != nil {
				require.NoError(b, p.Free(blk))
			}
		}
	}
}

// BenchmarkManagerPair measures Manager.Alloc plus Free of 4 KiB on a warm
// cache: the pool pair plus the role accounting and the Allocation handle.
func BenchmarkManagerPair(b *testing.B) {
	m := memory.NewHostManager(memory.Config{})
	defer func() { require.NoError(b, m.Close()) }()
	b.ReportAllocs()
	for b.Loop() {
		a, err := m.Alloc(4<<10, memory.RoleActivation)
		if err != nil {
			b.Fatal(err)
		}
		sinkAddr += a.Addr()
		if err := a.Free(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/pair")
}
