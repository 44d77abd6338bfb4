package gorgonia_test

// GPU tests: each skips, with the reason, where no CUDA driver or device is
// usable (CI). On a GPU machine, build here and run there:
//
//	CGO_ENABLED=0 go test -c -o .gpu/ ./interop/gorgonia/
//	.gpu/gorgonia.test -test.run GPU -test.v

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	gt "gorgonia.org/tensor"

	"github.com/strata-ml/strata/cuda"
	"github.com/strata-ml/strata/interop/gorgonia"
	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/tensor"
)

// gpuContext returns device 0's primary context, or skips the test.
func gpuContext(t *testing.T) *cuda.Context {
	t.Helper()
	if err := cuda.Init(); err != nil {
		t.Skipf("CUDA unavailable, GPU test skipped: %v", err)
	}
	n, err := cuda.DeviceCount()
	require.NoError(t, err)
	if n == 0 {
		t.Skip("the CUDA driver sees no device, GPU test skipped")
	}
	c, err := cuda.Device(0).PrimaryContext()
	require.NoError(t, err)
	return c
}

// gorgonia tensors in the CUDA manager's tiers: device memory (flagged
// inaccessible, filled and copied through the driver), managed and
// staging memory (which gorgonia computes on directly).
func TestGPUEngineTiers(t *testing.T) {
	ctx := gpuContext(t)
	m, err := memory.NewCUDAManager(ctx, memory.Config{})
	require.NoError(t, err)
	defer func() { require.NoError(t, m.Close()) }()

	// Gradients: pooled device memory.
	e, err := gorgonia.NewEngine(m, memory.RoleGradient, ctx)
	require.NoError(t, err)
	require.False(t, e.AllocAccessible())
	const r, c = 64, 33
	d := gt.New(gt.WithShape(r, c), gt.Of(gt.Float32), gt.WithEngine(e))
	assert.False(t, d.IsNativelyAccessible())
	assert.EqualValues(t, r*c*4, m.Stats().Tiers[memory.TierDevice].Requested.Current)
	_, err = e.Accessible(d)
	assert.ErrorIs(t, err, gorgonia.ErrInaccessible)
	_, err = gorgonia.FromDense(tensor.CPU(), d)
	assert.ErrorIs(t, err, gorgonia.ErrInaccessible)

	src := gt.New(gt.WithShape(r, c), gt.WithBacking(gt.Range(gt.Float32, 0, r*c)))
	back := gt.New(gt.WithShape(r, c), gt.Of(gt.Float32))
	require.NoError(t, e.Memcpy(d, src), "host to device")
	require.NoError(t, e.Memcpy(back, d), "device to host")
	assert.Equal(t, src.Data(), back.Data())
	d2 := gt.New(gt.WithShape(r, c), gt.Of(gt.Float32), gt.WithEngine(e))
	require.NoError(t, e.Memcpy(d2, d), "device to device")
	back.Zero()
	require.NoError(t, e.Memcpy(back, d2))
	assert.Equal(t, src.Data(), back.Data())

	// Fills: 4-byte values through cuMemsetD32, 1-byte through D8, others
	// through a host pattern.
	require.NoError(t, e.Memset(d, float32(-1.25)))
	require.NoError(t, e.Memcpy(back, d))
	for _, v := range back.Data().([]float32) {
		require.Equal(t, float32(-1.25), v)
	}
	e.Memclr(d)
	require.NoError(t, e.Memcpy(back, d))
	assert.Equal(t, make([]float32, r*c), back.Data())
	bytes8 := gt.New(gt.WithShape(7), gt.Of(gt.Uint8), gt.WithEngine(e))
	require.NoError(t, e.Memset(bytes8, uint8(9)))
	host8 := gt.New(gt.WithShape(7), gt.Of(gt.Uint8))
	require.NoError(t, e.Memcpy(host8, bytes8))
	assert.Equal(t, []uint8{9, 9, 9, 9, 9, 9, 9}, host8.Data())
	f64 := gt.New(gt.WithShape(5), gt.Of(gt.Float64), gt.WithEngine(e))
	require.NoError(t, e.Memset(f64, 3.5))
	host64 := gt.New(gt.WithShape(5), gt.Of(gt.Float64))
	require.NoError(t, e.Memcpy(host64, f64))
	assert.Equal(t, []float64{3.5, 3.5, 3.5, 3.5, 3.5}, host64.Data())
	row, err := d.Slice(gt.S(1))
	require.NoError(t, err)
	assert.ErrorIs(t, e.Memset(row.(*gt.Dense), float32(1)), memory.ErrInvalidArgument, "a view of device memory")
	for _, x := range []*gt.Dense{d, d2, bytes8, f64} {
		free(t, e, x)
	}

	// Embeddings (managed memory) and transfer buffers (staging memory):
	// host-accessible, so gorgonia's standard engine computes on them.
	props := ctx.Properties()
	for _, tc := range []struct {
		role memory.Role
		tier memory.Tier
		ok   bool
	}{
		{memory.RoleEmbedding, memory.TierManaged, props.ManagedMemory},
		{memory.RoleStaging, memory.TierStaging, props.CanMapHostMemory},
	} {
		if !tc.ok {
			t.Logf("%s memory not supported, skipped", tc.tier)
			continue
		}
		he, err := gorgonia.NewEngine(m, tc.role, ctx)
		require.NoError(t, err)
		require.True(t, he.AllocAccessible(), "%s", tc.tier)
		a := gt.New(gt.WithShape(r, c), gt.Of(gt.Float32), gt.WithEngine(he))
		assert.EqualValues(t, r*c*4, m.Stats().Tiers[tc.tier].Requested.Current, "%s", tc.tier)
		require.NoError(t, a.Memset(float32(1)))
		_, err = a.Add(src, gt.UseUnsafe())
		require.NoError(t, err, "%s", tc.tier)
		x, err := gorgonia.FromDense(tensor.CPU(), a)
		require.NoError(t, err)
		assert.InDelta(t, float64(r*c*(r*c-1))/2+r*c, sum(x.Float64s()), 0, "%s", tc.tier)
		x.Release()
		free(t, he, a)
	}
	assert.Zero(t, m.InUse())
}

// Conversion goes through host copies on a CUDA device too.
func TestGPUConversion(t *testing.T) {
	gpuContext(t)
	dev, err := tensor.CUDA(0)
	if err != nil {
		t.Skipf("no CUDA device for tensors: %v", err)
	}
	tensor.WithScope(func() {
		for _, dt := range shared {
			x := values(t, dt.s, 3, 5).ToDevice(dev)
			d, err := gorgonia.ToDense(x.T())
			require.NoError(t, err)
			assert.Equal(t, x.T().Contiguous().Float64s(), logical(t, d))
			back, err := gorgonia.FromDense(dev, d)
			require.NoError(t, err)
			assert.Equal(t, dev, back.Device())
			assert.Equal(t, x.T().Contiguous().RawBytes(), back.RawBytes(), "%v", dt.s)
		}
	})
}

func sum(v []float64) float64 {
	var s float64
	for _, x := range v {
		s += x
	}
	return s
}
