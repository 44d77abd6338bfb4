package nn_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/nn"
	"github.com/strata-ml/strata/tensor"
)

// TestLoadTrainStatePeakIsOneTensor: LoadTrainState read the whole file
// onto the first parameter's device and moved a parameter's weights and
// moments to its own device before copying them in, so that while it ran
// every device held its part of the state twice (the first one the whole
// file besides its own). Loading a tensor at a time through a staging
// buffer keeps the extra on each device's host tier to about one tensor:
// the bound here is two of the largest (the staging buffer and a check's
// temporary, besides a few scalars of the checks), where the state is
// many times that. The loaded values are the saved ones, on both devices.
// (A host manager's tiers are all host memory: the staging buffer is in
// its staging tier, the state in its device tier; the bound is on their
// total.)
func TestLoadTrainStatePeakIsOneTensor(t *testing.T) {
	ma, mb := memory.NewHostManager(memory.Config{}), memory.NewHostManager(memory.Config{})
	da, db := tensor.NewCPUDevice(ma), tensor.NewCPUDevice(mb)
	var ps []*nn.Parameter
	var largest int64
	for i := range 8 {
		dev := da
		if i%2 == 1 {
			dev = db
		}
		l := nn.Must(nn.NewLinear(nn.Options{Device: dev, Rng: rand.New(rand.NewPCG(uint64(i), 9))}, fmt.Sprintf("l%d", i), 16, 16, true, 0))
		ps = append(ps, l.Parameters()...)
		largest = max(largest, l.Weight.Value.Bytes())
	}
	opt := nn.NewAdamW(ps, 0.1, 0.1)
	defer func() { opt.Release(); nn.Release(ps) }()
	path := stepAndSave(t, ps, opt, 0.25)
	want := make([][]float32, len(ps))
	for i, p := range ps {
		want[i] = p.Value.Float32s()
		p.Value.Fill(3)
	}
	host := func(m *memory.Manager) memory.Stat { return m.Stats().Total.Requested }
	before := [2]int64{host(ma).Current, host(mb).Current}
	ma.ResetPeaks()
	mb.ResetPeaks()
	_, err := nn.LoadTrainState(path, ps, opt)
	require.NoError(t, err)
	for i, m := range []*memory.Manager{ma, mb} {
		s := host(m)
		require.Equal(t, before[i], s.Current, "device %d: the load keeps nothing", i)
		// Each device holds half the state: 4 layers, weights and
		// moments, 12 times the largest tensor and more.
		require.Greater(t, before[i], 12*largest, "device %d: the state dwarfs the bound", i)
		require.LessOrEqual(t, s.Peak-before[i], 2*largest+256, "device %d: extra bytes at the peak of the load", i)
	}
	for i, p := range ps {
		require.Equal(t, want[i], p.Value.Float32s(), p.Name)
	}
}
