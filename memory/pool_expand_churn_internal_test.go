package memory

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// mapCountVM counts the pages a pool maps (created or stolen).
type mapCountVM struct {
	VirtualMemory
	maps int64
}

func (v *mapCountVM) Map(addr uintptr, pages []Page) error {
	v.maps += int64(len(pages))
	return v.VirtualMemory.Map(addr, pages)
}

// churnWorkload replaces one of live slots with a block of a log-uniform
// size from 512 B to max bytes, n times, drawing from rng.
func churnWorkload(t *testing.T, p *Pool, blocks []*Block, rng *rand.Rand, n int, max float64) {
	lo, hi := math.Log(512), math.Log(max)
	for range n {
		s := rng.IntN(len(blocks))
		if blocks[s] != nil {
			require.NoError(t, p.Free(blocks[s]))
		}
		b, err := p.Alloc(int64(math.Exp(lo+rng.Float64()*(hi-lo))), 0)
		require.NoError(t, err)
		blocks[s] = b
	}
}

func TestExpandableChurnEarnsSlack(t *testing.T) {
	vm := &mapCountVM{VirtualMemory: newHostBackend(TierHost, "host").(VirtualMemory)}
	p := NewPool(vm, PoolConfig{Expandable: true})
	defer func() { require.NoError(t, p.Close()) }()
	blocks := make([]*Block, 256)
	rng := rand.New(rand.NewPCG(1, 2))
	const phase = (churnStreak + 3) * (1 << 16)
	churnWorkload(t, p, blocks, rng, phase, 32<<20)
	first := vm.maps
	mid := p.Stats()
	churnWorkload(t, p, blocks, rng, phase, 32<<20)
	last := vm.maps - first
	st := p.Stats()
	for _, b := range blocks {
		require.NoError(t, p.Free(b))
	}

	assert.Positive(t, p.churnState.slack, "a workload that never repeats keeps stealing: it earns slack")
	assert.LessOrEqual(t, p.churnState.slack, churnMax)
	// Without the slack the second phase maps about as many pages as the
	// first (0.005 a pair); with it, a fraction.
	assert.Less(t, float64(last), float64(first)/4, "pages mapped: %d in the first phase, %d in the second", first, last)
	assert.Less(t, float64(last)/phase, 0.001, "pages mapped a pair in the second phase")
	// Memory for speed, bounded: at most the slack's share of the peak
	// allocated bytes above it (and a page per pool kind).
	bound := float64(st.Allocated.Peak)*(1+churnMax) + float64(2*HostPageSize)
	assert.LessOrEqual(t, float64(st.Reserved.Peak), bound)
	assert.Greater(t, st.Reserved.Peak, mid.Reserved.Peak, "the slack is memory")
	checkExpandable(t, p)
}

func TestExpandableRepeatingStepsKeepNoSlack(t *testing.T) {
	vm := &mapCountVM{VirtualMemory: newHostBackend(TierHost, "host").(VirtualMemory)}
	p := NewPool(vm, PoolConfig{Expandable: true})
	defer func() { require.NoError(t, p.Close()) }()
	// A step: the mixed workload's first 3,000 replacements from one seed,
	// then every block freed; the same step again and again, for several
	// windows. Its first steps steal (the pages of freed blocks are moved
	// where larger requests go), then every request finds a cached block.
	step := func() {
		blocks := make([]*Block, 64)
		churnWorkload(t, p, blocks, rand.New(rand.NewPCG(3, 4)), 3000, 8<<20)
		for _, b := range blocks {
			if b != nil {
				require.NoError(t, p.Free(b))
			}
		}
	}
	step()
	first := vm.maps
	step()
	step()
	warm, reserved := vm.maps, p.Stats().Reserved.Peak
	require.Positive(t, first)
	for range (churnStreak + 3) * (1 << 16) / 3000 {
		step()
	}
	t.Logf("pages mapped: %d in the first step, %d after three, %d after %d", first, warm, vm.maps, 3+(churnStreak+3)*(1<<16)/3000)
	t.Logf("churn %+v allocs %d", p.churnState, p.sinks.own.Allocs)
	assert.Zero(t, p.churnState.slack, "a repeating step does not churn")
	assert.Equal(t, reserved, p.Stats().Reserved.Peak, "the repeating steps held no more than the first three")
	checkExpandable(t, p)
}
