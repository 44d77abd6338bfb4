package tensor_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/tensor"
)

// TestTimer: a span per mark after the first, named by it; the device's
// time covers the ops queued between two marks (a product large enough
// to be seen), and Reset and Close leave a usable timer.
func TestTimer(t *testing.T) {
	onDevices(t, func(t *testing.T, dev tensor.Device) {
		tm := tensor.NewTimer(dev)
		defer func() { require.NoError(t, tm.Close()) }()
		spans, err := tm.Spans()
		require.NoError(t, err)
		assert.Empty(t, spans, "no marks, no spans")
		rng := rand.New(rand.NewPCG(1, 2))
		tensor.WithScope(func() {
			a := tensor.RandN(dev, tensor.Float32, rng, 1, 512, 512)
			for round := range 2 {
				tm.Reset()
				require.NoError(t, tm.Mark("start"))
				require.NoError(t, tm.Mark("nothing"))
				for range 4 {
					a = tensor.MatMul(a, a)
					a.ScaleInPlace(1.0 / 512)
				}
				require.NoError(t, tm.Mark("products"))
				spans, err := tm.Spans()
				require.NoError(t, err, "round %d", round)
				require.Len(t, spans, 2)
				assert.Equal(t, "nothing", spans[0].Name)
				assert.Equal(t, "products", spans[1].Name)
				assert.Positive(t, spans[1].Device, "four 512x512 products take time")
				assert.Positive(t, spans[1].Host)
				assert.GreaterOrEqual(t, spans[0].Device, time.Duration(0))
				if dev.Kind() == tensor.KindCPU {
					assert.Equal(t, spans[1].Host, spans[1].Device, "the CPU's ops finish before they return")
				}
			}
		})
	})
}
