package gorgonia_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	gt "gorgonia.org/tensor"

	"github.com/strata-ml/strata/interop/gorgonia"
	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/memory/memtest"
)

var _ gt.Engine = (*gorgonia.Engine)(nil)

// hostEngine returns an engine over a host manager (every tier in host
// memory, the hybrid policy: activations in the device tier).
func hostEngine(t *testing.T, role memory.Role) (*gorgonia.Engine, *memory.Manager) {
	t.Helper()
	m := memory.NewHostManager(memory.Config{})
	e, err := gorgonia.NewEngine(m, role, nil)
	require.NoError(t, err)
	return e, m
}

// free gives a Dense made with e back to it.
func free(t *testing.T, e *gorgonia.Engine, d *gt.Dense) {
	t.Helper()
	require.NoError(t, e.Free(d, int64(d.MemSize())))
}

// A Dense made WithEngine takes its memory from the manager, in the tier
// the policy gives the engine's role, is counted there, and computes with
// gorgonia's standard engine; once freed the manager holds nothing.
func TestDenseInStrataMemory(t *testing.T) {
	e, m := hostEngine(t, memory.RoleActivation)
	require.True(t, e.AllocAccessible())
	assert.Equal(t, memory.RoleActivation, e.Role())
	assert.Same(t, m, e.Manager())

	a := gt.New(gt.WithShape(3, 4), gt.Of(gt.Float32), gt.WithEngine(e))
	assert.Same(t, e, a.Engine())
	assert.True(t, a.IsManuallyManaged())
	assert.True(t, a.IsNativelyAccessible())
	s := m.Stats()
	assert.EqualValues(t, 48, m.InUse())
	assert.EqualValues(t, 48, s.Roles[memory.RoleActivation].Requested.Current)
	assert.EqualValues(t, 48, s.Tiers[memory.TierDevice].Requested.Current, "activations live in the device tier")

	require.NoError(t, a.Memset(float32(1.5)))
	b := gt.New(gt.WithShape(3, 4), gt.WithBacking(gt.Range(gt.Float32, 0, 12))) // Go memory
	sum, err := gt.Add(a, b)
	require.NoError(t, err)
	assert.Equal(t, []float32{1.5, 2.5, 3.5, 4.5, 5.5, 6.5, 7.5, 8.5, 9.5, 10.5, 11.5, 12.5}, sum.Data())
	// gorgonia clones a to hold the sum: that comes from the manager too.
	assert.Same(t, e, sum.Engine())
	assert.EqualValues(t, 96, m.InUse())
	require.NoError(t, e.Free(sum, int64(sum.MemSize())))

	// In place, into strata memory.
	_, err = a.Add(b, gt.UseUnsafe())
	require.NoError(t, err)
	assert.Equal(t, []float32{1.5, 2.5, 3.5, 4.5, 5.5, 6.5, 7.5, 8.5, 9.5, 10.5, 11.5, 12.5}, a.Data())
	// Every dtype gorgonia has that holds no pointers.
	for _, dt := range []gt.Dtype{gt.Float64, gt.Int32, gt.Int64, gt.Uint8, gt.Bool, gt.Complex128} {
		d := gt.New(gt.WithShape(5), gt.Of(dt), gt.WithEngine(e))
		assert.EqualValues(t, 48+5*dt.Size(), m.InUse(), "%v", dt)
		d.Zero()
		free(t, e, d)
	}

	free(t, e, a)
	assert.Zero(t, m.InUse())
	s = m.Stats()
	assert.Zero(t, s.Total.Allocated.Current)
	r := s.Roles[memory.RoleActivation]
	assert.Equal(t, r.Allocs, r.Frees, "every allocation freed (NewEngine's probe included)")
	require.NoError(t, m.Close(), "no leak")
}

// The engine's role decides the tier: here staging, and a policy that puts
// everything in managed memory.
func TestEngineFollowsPolicy(t *testing.T) {
	e, m := hostEngine(t, memory.RoleStaging)
	d := gt.New(gt.WithShape(8), gt.Of(gt.Float64), gt.WithEngine(e))
	assert.EqualValues(t, 64, m.Stats().Tiers[memory.TierStaging].Requested.Current)
	free(t, e, d)

	m2 := memory.NewHostManager(memory.Config{Policy: memory.SingleTierPolicy(memory.TierManaged)})
	e2, err := gorgonia.NewEngine(m2, memory.RoleParameter, nil)
	require.NoError(t, err)
	d2 := gt.New(gt.WithShape(8), gt.Of(gt.Float64), gt.WithEngine(e2))
	assert.EqualValues(t, 64, m2.Stats().Tiers[memory.TierManaged].Requested.Current)
	free(t, e2, d2)
	assert.Zero(t, m2.InUse())
}

func TestEngineMemsetMemclrMemcpy(t *testing.T) {
	e, m := hostEngine(t, memory.RoleActivation)
	d := gt.New(gt.WithShape(2, 3), gt.Of(gt.Float64), gt.WithEngine(e))
	defer free(t, e, d)

	require.NoError(t, e.Memset(d, 2.5))
	assert.Equal(t, []float64{2.5, 2.5, 2.5, 2.5, 2.5, 2.5}, d.Data())
	assert.ErrorIs(t, e.Memset(d, float32(1)), memory.ErrInvalidArgument, "the value must be of the Dense's type")
	// A view sets only its own elements.
	row, err := d.Slice(gt.S(1))
	require.NoError(t, err)
	require.NoError(t, e.Memset(row.(*gt.Dense), -1.0))
	assert.Equal(t, []float64{2.5, 2.5, 2.5, -1, -1, -1}, d.Data())

	// Go memory to strata memory and back.
	src := gt.New(gt.WithShape(2, 3), gt.WithBacking([]float64{1, 2, 3, 4, 5, 6}))
	require.NoError(t, e.Memcpy(d, src))
	assert.Equal(t, []float64{1, 2, 3, 4, 5, 6}, d.Data())
	dst := gt.New(gt.WithShape(2, 3), gt.Of(gt.Float64))
	require.NoError(t, e.Memcpy(dst, d))
	assert.Equal(t, []float64{1, 2, 3, 4, 5, 6}, dst.Data())
	small := gt.New(gt.WithShape(2), gt.Of(gt.Float64))
	assert.ErrorIs(t, e.Memcpy(small, d), memory.ErrInvalidArgument)
	// gt.Copy and Clone go through the engine's Memcpy.
	c := d.Clone().(*gt.Dense)
	assert.Equal(t, d.Data(), c.Data())
	assert.EqualValues(t, 96, m.InUse())
	free(t, e, c)

	e.Memclr(d)
	assert.Equal(t, make([]float64, 6), d.Data())

	// Raw memory from Alloc: filled with the value's bytes.
	raw, err := e.Alloc(16)
	require.NoError(t, err)
	require.NoError(t, e.Memset(raw, int32(-2)))
	back := gt.New(gt.WithShape(4), gt.Of(gt.Int32))
	require.NoError(t, e.Memcpy(back, raw))
	assert.Equal(t, []int32{-2, -2, -2, -2}, back.Data())
	assert.ErrorIs(t, e.Memset(raw, "x"), memory.ErrInvalidArgument)
	assert.ErrorIs(t, e.Memset(raw, [3]byte{}), memory.ErrInvalidArgument)
	odd, err := e.Alloc(12)
	require.NoError(t, err)
	assert.ErrorIs(t, e.Memset(odd, 1.0), memory.ErrInvalidArgument, "12 bytes are not whole float64s")
	require.NoError(t, e.Free(odd, 12))
	e.Memclr(raw)
	require.NoError(t, e.Memcpy(back, raw))
	assert.Equal(t, []int32{0, 0, 0, 0}, back.Data())
	got, err := e.Accessible(raw)
	require.NoError(t, err)
	assert.Equal(t, raw, got)
	require.NoError(t, e.Free(raw, 16))
	assert.True(t, e.WorksWith(gt.ColMajor))
}

func TestEngineFreeErrors(t *testing.T) {
	e, m := hostEngine(t, memory.RoleActivation)
	d := gt.New(gt.WithShape(4, 4), gt.Of(gt.Float32), gt.WithEngine(e))
	view, err := d.Slice(gt.S(1, 3))
	require.NoError(t, err)
	assert.ErrorIs(t, e.Free(view.(*gt.Dense), 32), memory.ErrDoubleFree, "a view is not an allocation")
	assert.ErrorIs(t, e.Free(d, 32), memory.ErrInvalidArgument, "wrong size")
	goDense := gt.New(gt.WithShape(4), gt.Of(gt.Float32))
	assert.ErrorIs(t, e.Free(goDense, 16), memory.ErrDoubleFree, "Go memory")
	assert.ErrorIs(t, e.Free(nil, 0), memory.ErrInvalidArgument)
	free(t, e, d)
	assert.ErrorIs(t, e.Free(d, 64), memory.ErrDoubleFree, "freed twice")
	assert.Zero(t, m.InUse())

	empty, err := e.Alloc(0) // a Dense of no elements: no memory
	require.NoError(t, err)
	require.NoError(t, e.Free(empty, 0))
	_, err = e.Alloc(-1)
	assert.ErrorIs(t, err, memory.ErrInvalidArgument)
	_, err = gorgonia.NewEngine(nil, memory.RoleActivation, nil)
	assert.ErrorIs(t, err, memory.ErrInvalidArgument)
	// A role no tier of the manager can hold fails at once.
	only, err := memory.NewManager([]memory.Backend{memory.NewHostBackend(memory.TierStaging)}, memory.Config{})
	require.NoError(t, err)
	_, err = gorgonia.NewEngine(only, memory.RoleParameter, nil)
	assert.ErrorIs(t, err, memory.ErrInvalidArgument)
	// Out of memory is the manager's error (with spilling to the offload
	// tier off: the hybrid policy would serve the request there).
	noSpill := memory.HybridPolicy()
	noSpill.Spill = false
	limited := memory.NewHostManager(memory.Config{Policy: noSpill, Limits: [memory.NumTiers]int64{memory.TierDevice: 4 << 20}})
	le, err := gorgonia.NewEngine(limited, memory.RoleActivation, nil)
	require.NoError(t, err)
	_, err = le.Alloc(64 << 20)
	assert.ErrorIs(t, err, memory.ErrOutOfMemory)
}

// A tier the CPU cannot address (device memory, here address ranges with
// nothing behind them): its Denses are flagged inaccessible, nothing reads
// them, and moving bytes needs a CUDA context.
func TestEngineInaccessibleTier(t *testing.T) {
	dev := memtest.NewAddressBackend(memory.TierDevice, 1<<30)
	m, err := memory.NewManager([]memory.Backend{memory.NewHostBackend(memory.TierHost), dev}, memory.Config{})
	require.NoError(t, err)
	e, err := gorgonia.NewEngine(m, memory.RoleGradient, nil)
	require.NoError(t, err)
	assert.False(t, e.AllocAccessible())

	d := gt.New(gt.WithShape(16, 16), gt.Of(gt.Float32), gt.WithEngine(e))
	assert.False(t, d.IsNativelyAccessible())
	assert.EqualValues(t, 1024, m.Stats().Tiers[memory.TierDevice].Requested.Current)
	_, err = e.Accessible(d)
	assert.ErrorIs(t, err, gorgonia.ErrInaccessible)
	_, err = gorgonia.FromDense(cpu, d)
	assert.ErrorIs(t, err, gorgonia.ErrInaccessible)
	_, err = gt.Add(d, d)
	assert.Error(t, err, "gorgonia refuses to compute on it")

	host := gt.New(gt.WithShape(16, 16), gt.Of(gt.Float32))
	assert.ErrorIs(t, e.Memcpy(d, host), gorgonia.ErrInaccessible)
	assert.ErrorIs(t, e.Memcpy(host, d), gorgonia.ErrInaccessible)
	assert.ErrorIs(t, e.Memset(d, float32(1)), gorgonia.ErrInaccessible)
	assert.Panics(t, func() { e.Memclr(d) })

	// Host memory still copies through this engine; a staging role falls
	// back to the host tier.
	h2 := gt.New(gt.WithShape(16, 16), gt.Of(gt.Float32))
	require.NoError(t, host.Memset(float32(3)))
	require.NoError(t, e.Memcpy(h2, host))
	assert.Equal(t, host.Data(), h2.Data())

	free(t, e, d)
	regions, bytes := dev.Live()
	assert.Equal(t, 1, regions, "the pool keeps its segment cached")
	assert.Positive(t, bytes)
	assert.Zero(t, m.InUse())
	require.NoError(t, m.Close())
	regions, _ = dev.Live()
	assert.Zero(t, regions)
}

// An engine made when its role was host memory refuses to hand out device
// memory after the policy moved the role.
func TestEngineKeepsItsPromise(t *testing.T) {
	dev := memtest.NewAddressBackend(memory.TierDevice, 1<<30)
	m, err := memory.NewManager([]memory.Backend{memory.NewHostBackend(memory.TierHost), dev},
		memory.Config{Policy: memory.SingleTierPolicy(memory.TierHost)})
	require.NoError(t, err)
	e, err := gorgonia.NewEngine(m, memory.RoleParameter, nil)
	require.NoError(t, err)
	require.True(t, e.AllocAccessible())
	m.SetPolicy(memory.SingleTierPolicy(memory.TierDevice))
	_, err = e.Alloc(64)
	assert.ErrorIs(t, err, gorgonia.ErrInaccessible)
	assert.Zero(t, m.InUse())
}
