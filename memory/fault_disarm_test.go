package memory_test

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/memory"
)

// TestFailAllocationDisarmKeepsOthersPlan: FailAllocation(0) of one
// manager, racing another manager's arming, leaves the other's plan
// armed. It read the plan and then stored nil, so a plan armed between
// the two was wiped and the other manager's chosen allocation succeeded;
// it now clears only its own (CompareAndSwap). The window is a few
// instructions wide: this test did not fail before, it exercises the
// path (run it under -race too).
func TestFailAllocationDisarmKeepsOthersPlan(t *testing.T) {
	a := memory.NewHostManager(memory.Config{})
	defer func() { require.NoError(t, a.Close()) }()
	b := memory.NewHostManager(memory.Config{})
	defer func() { require.NoError(t, b.Close()) }()
	defer b.FailAllocation(0)
	for i := range 2000 {
		a.FailAllocation(1)
		var wg sync.WaitGroup
		wg.Go(func() { a.FailAllocation(0) })
		b.FailAllocation(1)
		wg.Wait()
		x, err := b.Alloc(64, memory.RoleActivation)
		if err == nil {
			require.NoError(t, x.Free())
		}
		require.ErrorIs(t, err, memory.ErrInjected, "round %d: b's plan was wiped by a's disarm", i)
	}
}
