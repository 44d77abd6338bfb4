package nn

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/tensor"
)

// trainStateFixture is a 10x10 Linear layer on each of devs ("l0",
// "l1", ...) after one AdamW step, its state saved at path, and the
// saved weights and moments.
func trainStateFixture(t *testing.T, devs ...tensor.Device) (ps []*Parameter, opt *AdamW, path string, want map[string][]float32) {
	t.Helper()
	for i, dev := range devs {
		l := Must(NewLinear(Options{Device: dev, Rng: rand.New(rand.NewPCG(5, uint64(i)))}, fmt.Sprint("l", i), 10, 10, true, 0))
		ps = append(ps, l.Parameters()...)
	}
	opt = NewAdamW(ps, 0.1, 0.1)
	t.Cleanup(func() { opt.Release(); Release(ps) })
	for i, p := range ps {
		g, err := tensor.NewKept(p.Value.Device(), tensor.Float32, memory.RoleGradient, p.Value.Shape()...)
		require.NoError(t, err)
		g.Fill(0.5 * float64(i+1))
		p.Grad = g
	}
	require.NoError(t, opt.Step())
	ZeroGrad(ps)
	path = filepath.Join(t.TempDir(), "state.safetensors")
	require.NoError(t, SaveTrainState(context.Background(), path, ps, opt, nil))
	want = map[string][]float32{}
	for _, p := range ps {
		want[p.Name] = p.Value.Float32s()
		want[ExpAvgPrefix+p.Name] = opt.m[p].Float32s()
		want[ExpAvgSqPrefix+p.Name] = opt.v[p].Float32s()
	}
	return ps, opt, path, want
}

// requireState says ps and opt hold want's values.
func requireState(t *testing.T, ps []*Parameter, opt *AdamW, want map[string][]float32, msg string) {
	t.Helper()
	for _, p := range ps {
		require.Equal(t, want[p.Name], p.Value.Float32s(), "%s: %s", msg, p.Name)
		require.Equal(t, want[ExpAvgPrefix+p.Name], opt.m[p].Float32s(), "%s: exp_avg of %s", msg, p.Name)
		require.Equal(t, want[ExpAvgSqPrefix+p.Name], opt.v[p].Float32s(), "%s: exp_avg_sq of %s", msg, p.Name)
	}
}

// rewrite writes the state file at path again with the last element of
// its tensor name set to v.
func rewrite(t *testing.T, path, name string, v float64) string {
	t.Helper()
	ts, meta, err := tensor.ReadSafetensors(path, tensor.CPU())
	require.NoError(t, err)
	defer func() {
		for _, x := range ts {
			x.Release()
		}
	}()
	old := ts[name]
	vals := old.Float64s()
	vals[len(vals)-1] = v
	ts[name] = tensor.FromFloats(tensor.CPU(), old.DType(), vals, old.Shape()...)
	old.Release()
	bad := filepath.Join(t.TempDir(), "bad.safetensors")
	require.NoError(t, tensor.WriteSafetensors(bad, ts, meta))
	return bad
}

// TestLoadTrainStateInChunks: a tensor larger than the staging buffer
// goes through it a chunk at a time, the checks included: a bad value in
// its last chunk is found (and changes nothing), the values load
// exactly, and the extra memory of the load stays below the size of one
// tensor.
func TestLoadTrainStateInChunks(t *testing.T) {
	defer func(n int) { loadChunk = n }(loadChunk)
	loadChunk = 64 // 16 float32s: the 10x10 weights take 7 chunks
	m := memory.NewHostManager(memory.Config{})
	dev := tensor.NewCPUDevice(m)
	ps, opt, path, want := trainStateFixture(t, dev)
	for _, p := range ps {
		p.Value.Fill(7)
	}
	for _, c := range []struct {
		name, what string
		v          float64
	}{
		{"l0.weight", "not finite", math.NaN()},
		{ExpAvgPrefix + "l0.weight", "NaN or infinite", math.Inf(1)},
		{ExpAvgSqPrefix + "l0.weight", "negative entry", -1},
	} {
		_, err := LoadTrainState(rewrite(t, path, c.name, c.v), ps, opt)
		require.ErrorIs(t, err, tensor.ErrArgument, c.name)
		require.ErrorContains(t, err, c.what, c.name)
		for _, p := range ps {
			for _, x := range p.Value.Float32s() {
				require.Equal(t, float32(7), x, "%s: %s changed by a refused load", c.name, p.Name)
			}
		}
	}
	before := m.Stats().Total.Requested.Current
	m.ResetPeaks()
	_, err := LoadTrainState(path, ps, opt)
	require.NoError(t, err)
	requireState(t, ps, opt, want, "loaded in chunks")
	s := m.Stats().Total.Requested
	require.Equal(t, before, s.Current)
	require.Less(t, s.Peak-before, ps[0].Value.Bytes(), "the extra of a load in chunks, below one tensor (400 bytes)")
}

// TestLoadTrainStateWithoutHostStaging: on a device whose staging memory
// the host cannot write (a GPU whose policy puts RoleStaging in device
// memory; a host manager pretends here), the tensors are uploaded whole
// before anything changes: they load, and running out of memory at any
// allocation of the load, on either device, changes nothing and leaves
// nothing allocated.
func TestLoadTrainStateWithoutHostStaging(t *testing.T) {
	asked := 0
	defer func(f func(*tensor.Tensor) []byte) { stagingHost = f }(stagingHost)
	stagingHost = func(*tensor.Tensor) []byte { asked++; return nil }
	ma, mb := memory.NewHostManager(memory.Config{}), memory.NewHostManager(memory.Config{})
	da, db := tensor.NewCPUDevice(ma), tensor.NewCPUDevice(mb)
	ps, opt, path, want := trainStateFixture(t, da, db)
	for _, p := range ps {
		p.Value.Fill(7)
	}
	for _, mgr := range []*memory.Manager{ma, mb} {
		failed := 0
		for k := int64(1); ; k++ {
			inUse := [2]int64{ma.InUse(), mb.InUse()}
			mgr.FailAllocation(k)
			_, err := LoadTrainState(path, ps, opt)
			mgr.FailAllocation(0)
			if err == nil {
				break
			}
			failed++
			require.ErrorIs(t, err, memory.ErrInjected, "allocation %d", k)
			require.Equal(t, inUse, [2]int64{ma.InUse(), mb.InUse()}, "allocation %d: nothing left", k)
			for _, p := range ps {
				for _, x := range p.Value.Float32s() {
					require.Equal(t, float32(7), x, "allocation %d: %s changed by a failed load", k, p.Name)
				}
			}
		}
		require.Greater(t, failed, 2, "the whole uploads were among the allocations failed")
		requireState(t, ps, opt, want, "loaded without host staging")
		for _, p := range ps {
			p.Value.Fill(7)
		}
	}
	require.Positive(t, asked, "the staging buffers were asked for the host's view")
}
