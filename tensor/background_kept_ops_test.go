package tensor_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/tensor"
)

// An op on kept tensors alone (which runs in Background) from a goroutine
// working in its own Ctx is no misuse while another goroutine has been
// handed Background: its result is an orphan, owned by no scope, and the
// goroutine's Ctx adopts it at the first op that meets its tensors.
// Background's other goroutine's scope does not take it.
func TestKeptOnlyOpWhileBackgroundHandedOff(t *testing.T) {
	w, err := tensor.NewKept(cpu, tensor.Float32, 0, 2, 3)
	require.NoError(t, err)
	defer w.Release()
	tensor.WithScope(func() {
		w.CopyFrom(tensor.FromFloat32s(cpu, []float32{1, 2, 3, 4, 5, 6}, 2, 3))
		opened, done, fin := make(chan struct{}), make(chan struct{}), make(chan error)
		go func() {
			fin <- tensor.Try(func() { tensor.WithScope(func() { close(opened); <-done }) })
		}()
		<-opened
		c := tensor.NewCtx()
		var row []float32
		err := tensor.Try(func() {
			c.WithScope(func() {
				v := w.Narrow(0, 1, 1) // kept operand alone: Background
				require.Nil(t, v.Ctx(), "an orphan")
				s := tensor.Add(v, c.Ones(cpu, tensor.Float32, 1, 3))
				require.Equal(t, c, v.Ctx(), "adopted by the Ctx its first op met")
				row = s.Float32s()
			})
		})
		require.NoError(t, err)
		require.Equal(t, []float32{5, 6, 7}, row)
		require.Zero(t, c.BytesInUse())
		close(done)
		require.NoError(t, <-fin)
	})
}
