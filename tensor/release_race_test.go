package tensor_test

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/tensor"
)

// TestReleaseConcurrentFreesOnce: goroutines releasing the same tensor at
// once drop its one reference to the storage exactly once, whether a
// scope owns it or not: a view of the storage stays usable and its bytes
// in use, and the storage is freed when the view goes. Release checked
// the released flag and set it in two steps, so two goroutines could both
// pass the check and drop the reference twice, freeing the storage under
// the view (or panicking: released more often than retained).
func TestReleaseConcurrentFreesOnce(t *testing.T) {
	const goroutines = 16
	for round := range 200 {
		c := tensor.NewCtx()
		scoped := round%2 == 1
		var s *tensor.Scope
		if scoped {
			s = c.NewScope()
		}
		x := c.Zeros(cpu, tensor.Float32, 1024)
		v := x.Narrow(0, 0, 512) // a second reference to x's storage
		in := c.BytesInUse()
		require.Positive(t, in)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for range goroutines {
			wg.Go(func() {
				<-start
				x.Release()
			})
		}
		close(start)
		wg.Wait()
		require.True(t, x.Released())
		require.False(t, v.Released(), "round %d", round)
		require.Equal(t, 1, v.Views(), "round %d: the view's reference is the only one left", round)
		require.Equal(t, in, c.BytesInUse(), "round %d: the storage is still in use by the view", round)
		v.Release()
		require.Zero(t, c.BytesInUse(), "round %d: freed once the view goes", round)
		if scoped {
			s.Close()
		}
	}
}
