package memory_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/memory"
)

// errFreeBroken is the failure of freeFailVM's frees.
var errFreeBroken = errors.New("free broken")

// freeFailVM is a host virtual memory whose Free and ReleasePage fail,
// keeping the memory, while fail is set; kept lists what they kept, for
// the test to give back.
type freeFailVM struct {
	memory.VirtualMemory
	fail        bool
	keptRegions []memory.Region
	keptPages   []memory.Page
}

func (f *freeFailVM) Free(r memory.Region) error {
	if f.fail {
		f.keptRegions = append(f.keptRegions, r)
		return errFreeBroken
	}
	return f.VirtualMemory.Free(r)
}

func (f *freeFailVM) ReleasePage(p memory.Page) error {
	if f.fail {
		f.keptPages = append(f.keptPages, p)
		return errFreeBroken
	}
	return f.VirtualMemory.ReleasePage(p)
}

// giveBack frees what the failed calls kept.
func (f *freeFailVM) giveBack(t *testing.T) {
	f.fail = false
	for _, r := range f.keptRegions {
		require.NoError(t, f.VirtualMemory.Free(r))
	}
	for _, p := range f.keptPages {
		require.NoError(t, f.VirtualMemory.ReleasePage(p))
	}
}

// TestHostBudgetFailedFree: a region (or page) whose free fails may still
// be held (a failed munmap leaves it mapped), so its bytes stay charged
// to the budget, but the pool has dropped it and no one will free it
// again: the budget counts them as lost (HostBudget.Lost), so that what
// it holds is the pools' reserved bytes plus the lost ones, and its
// refusals say how much was lost. Before, the bytes stayed charged
// without a trace: the budget held more than every pool reserved, and an
// allocation it refused said nothing of why.
func TestHostBudgetFailedFree(t *testing.T) {
	for _, exp := range []bool{false, true} {
		vm := &freeFailVM{VirtualMemory: memory.NewHostBackend(memory.TierDevice).(memory.VirtualMemory)}
		var up memory.Backend = vm
		if !exp {
			up = struct{ memory.Backend }{vm} // not a VirtualMemory: classic segments
		}
		budget := memory.NewHostBudget(8<<20, "test")
		p := memory.NewPool(memory.NewBudgetBackend(up, budget), memory.PoolConfig{Expandable: exp})
		b, err := p.Alloc(1<<20, 0)
		require.NoError(t, err)
		require.NoError(t, p.Free(b))
		vm.fail = true
		require.ErrorIs(t, p.EmptyCache(), errFreeBroken, "expandable %v", exp)
		require.Zero(t, p.Stats().Reserved.Current, "the pool dropped what it could not free")
		used, _ := budget.Used()
		require.Equal(t, int64(2<<20), used, "the memory may still be held: still charged")
		require.Equal(t, int64(2<<20), budget.Lost(), "and lost: no pool holds it")

		// A second free of the kept region changes nothing: not ours.
		if !exp {
			bb := memory.NewBudgetBackend(up, budget)
			vm.fail = false
			require.ErrorIs(t, bb.Free(memory.Region{Addr: 1, Size: 4096}), memory.ErrDoubleFree)
			used, _ = budget.Used()
			require.Equal(t, int64(2<<20), used)
			require.Equal(t, int64(2<<20), budget.Lost())
			vm.fail = true
		}

		// The budget's 6 MiB left serve 3 segments or pages of 2 MiB, two
		// blocks of 1 MiB in each; the seventh is refused, naming the lost
		// bytes.
		var live []*memory.Block
		for range 6 {
			b, err := p.Alloc(1<<20, 0)
			require.NoError(t, err)
			live = append(live, b)
		}
		_, err = p.Alloc(1<<20, 0)
		require.ErrorIs(t, err, memory.ErrOutOfMemory)
		require.ErrorContains(t, err, "2.00 MiB of it lost to frees that failed")
		vm.fail = false
		for _, b := range live {
			require.NoError(t, p.Free(b))
		}
		require.NoError(t, p.Close())
		used, _ = budget.Used()
		require.Equal(t, budget.Lost(), used, "after Close, only the lost bytes")
		vm.giveBack(t)
	}
}

// doublingBackend hands out regions twice the size asked for: a bad
// region, which the pool gives back at once.
type doublingBackend struct{ memory.Backend }

func (d doublingBackend) Alloc(size int64) (memory.Region, error) {
	return d.Backend.Alloc(2 * size)
}

// TestHostBudgetBadRegionSize: a backend's region of another size than
// asked for is charged at its own size, which its free releases. Before,
// the budget charged the size asked for and released the region's: the
// pool's refusal of the bad region left the budget 2 MiB below zero.
func TestHostBudgetBadRegionSize(t *testing.T) {
	budget := memory.NewHostBudget(64<<20, "test")
	up := struct{ memory.Backend }{memory.NewHostBackend(memory.TierHost)} // classic segments
	p := memory.NewPool(memory.NewBudgetBackend(doublingBackend{up}, budget), memory.PoolConfig{})
	_, err := p.Alloc(1<<20, 0)
	require.ErrorIs(t, err, memory.ErrInvalidArgument, "a bad region")
	used, _ := budget.Used()
	require.Zero(t, used, "the bad region's charge went with it")
	require.NoError(t, p.Close())
}
