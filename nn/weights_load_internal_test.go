package nn

import (
	"context"
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/tensor"
)

// chunkShapes are parameters as a GPT names them: four Conv1D weights in
// Hugging Face's layout (one square), a bias, and a matrix that no
// layout transposes.
var chunkShapes = []struct {
	name  string
	shape []int
}{
	{"transformer.h.0.attn.c_attn.weight", []int{24, 8}},
	{"transformer.h.0.attn.c_attn.bias", []int{24}},
	{"transformer.h.0.attn.c_proj.weight", []int{8, 8}},
	{"transformer.h.0.mlp.c_fc.weight", []int{32, 8}},
	{"transformer.h.0.mlp.c_proj.weight", []int{8, 32}},
	{"transformer.lin.weight", []int{5, 7}},
}

// chunkValues are values for chunkShapes from seed, of magnitudes that
// round in float16 and bfloat16 (and float16's subnormals) but fit them.
func chunkValues(seed uint64) [][]float64 {
	rng := rand.New(rand.NewPCG(seed, 1))
	scales := []float64{1e-6, 0.3, 1000, 2e4}
	out := make([][]float64, len(chunkShapes))
	for i, s := range chunkShapes {
		n := 1
		for _, d := range s.shape {
			n *= d
		}
		out[i] = make([]float64, n)
		for j := range out[i] {
			out[i][j] = max(-6e4, min(6e4, rng.NormFloat64()*scales[j%len(scales)]))
		}
	}
	return out
}

// chunkParams are chunkShapes' parameters of dtype dt on dev holding vals,
// released at the end of the test.
func chunkParams(t *testing.T, dev tensor.Device, dt tensor.DType, vals [][]float64) []*Parameter {
	t.Helper()
	var ps []*Parameter
	for i, s := range chunkShapes {
		v, err := tensor.NewKept(dev, dt, memory.RoleParameter, s.shape...)
		require.NoError(t, err)
		tensor.WithScope(func() { v.CopyFrom(tensor.FromFloats(tensor.CPU(), tensor.Float64, vals[i], s.shape...)) })
		ps = append(ps, &Parameter{Var: autograd.Param(v, s.name), Name: s.name})
	}
	t.Cleanup(func() { Release(ps) })
	return ps
}

// paramBits are the bits of each parameter's values (exact through float64).
func paramBits(ps []*Parameter) [][]uint64 {
	out := make([][]uint64, len(ps))
	for i, p := range ps {
		for _, x := range p.Value.Float64s() {
			out[i] = append(out[i], math.Float64bits(x))
		}
	}
	return out
}

// oldLoad is what LoadWeightsLayout loaded into parameters like ps from
// the file at path in layout, before it loaded through a staging buffer:
// each tensor made from the file (c.FromBytes), transposed where it is a
// Conv1D weight in layout hf (T, then Contiguous), converted to the
// parameter's dtype (To), and copied in.
func oldLoad(t *testing.T, path string, ps []*Parameter, layout Layout) [][]uint64 {
	t.Helper()
	ts, _, err := tensor.ReadSafetensors(path, tensor.CPU())
	require.NoError(t, err)
	out := make([][]uint64, len(ps))
	tensor.WithScope(func() {
		for _, f := range ts {
			tensor.Adopt(f)
		}
		for i, p := range ps {
			f, ok := ts[p.Name]
			if !ok {
				f = ts[hfName(p.Name)]
			}
			if layout == LayoutHF && isConv1D(p) {
				f = f.T().Contiguous()
			}
			for _, x := range f.To(p.Value.DType()).Float64s() {
				out[i] = append(out[i], math.Float64bits(x))
			}
		}
	})
	return out
}

var floatDTypes = []tensor.DType{tensor.Float64, tensor.Float32, tensor.Float16, tensor.BFloat16}

// TestLoadWeightsInChunksAsBefore: loaded through a staging buffer a
// chunk at a time, whatever the chunk (one element, a part of a row of
// the file's transposed weights, or whole tensors), in both layouts,
// from and to every float dtype (rounding, float16's subnormals), the
// parameters get the bits they got when each tensor was made whole on
// the device, transposed there and converted; and the extra memory of a
// load in small chunks stays below one tensor.
func TestLoadWeightsInChunksAsBefore(t *testing.T) {
	defer func(n int) { loadChunk = n }(loadChunk)
	vals := chunkValues(3)
	for _, layout := range []Layout{LayoutNanoGPT, LayoutHF} {
		for _, from := range floatDTypes {
			path := filepath.Join(t.TempDir(), "w.safetensors")
			require.NoError(t, SaveWeightsLayout(context.Background(), path, chunkParams(t, tensor.CPU(), from, vals), nil, layout))
			for _, to := range floatDTypes {
				want := oldLoad(t, path, chunkParams(t, tensor.CPU(), to, vals), layout)
				for _, chunk := range []int{1, 40, 16 << 20} {
					loadChunk = chunk
					m := memory.NewHostManager(memory.Config{})
					ps := chunkParams(t, tensor.NewCPUDevice(m), to, chunkValues(4))
					before := m.Stats().Total.Requested.Current
					m.ResetPeaks()
					_, got, err := LoadWeightsLayout(path, ps, LayoutAuto)
					require.NoError(t, err, "%v, %v to %v, chunk %d", layout, from, to, chunk)
					s := m.Stats().Total.Requested // before paramBits, which converts on the device
					require.Equal(t, layout, got)
					require.Equal(t, want, paramBits(ps), "%v, %v to %v, chunk %d: the old path's bits", layout, from, to, chunk)
					require.Equal(t, before, s.Current, "%v, %v to %v, chunk %d: the load keeps nothing", layout, from, to, chunk)
					if chunk <= 40 {
						require.Less(t, s.Peak-before, ps[3].Value.Bytes(), "%v, %v to %v, chunk %d: the extra of a load in chunks, below one tensor", layout, from, to, chunk)
					}
				}
			}
		}
	}
}

// TestLoadWeightsInChunksRefusesValuesPastTheDType: a value of a
// float32 file past a float16 or bfloat16 parameter's range, in the last
// chunk of a Conv1D weight loaded transposed (and early in the file's
// order), is found by the check on the chunks, refused naming the
// tensor, and changes no parameter, the chunks before it included.
func TestLoadWeightsInChunksRefusesValuesPastTheDType(t *testing.T) {
	defer func(n int) { loadChunk = n }(loadChunk)
	for _, c := range []struct {
		to tensor.DType
		v  float64
	}{{tensor.Float16, 1e6}, {tensor.BFloat16, 3.4e38}} {
		vals := chunkValues(5)
		vals[3][31*8] = c.v // the c_fc weight's (31, 0): the file's (0, 31)
		path := filepath.Join(t.TempDir(), "w.safetensors")
		require.NoError(t, SaveWeightsLayout(context.Background(), path, chunkParams(t, tensor.CPU(), tensor.Float32, vals), nil, LayoutHF))
		for _, chunk := range []int{4, 40} {
			loadChunk = chunk
			m := memory.NewHostManager(memory.Config{})
			ps := chunkParams(t, tensor.NewCPUDevice(m), c.to, chunkValues(6))
			want, inUse := paramBits(ps), m.InUse()
			_, _, err := LoadWeightsLayout(path, ps, LayoutAuto)
			require.ErrorIs(t, err, tensor.ErrArgument, "%v, chunk %d", c.to, chunk)
			require.ErrorContains(t, err, `"transformer.h.0.mlp.c_fc.weight": its float32 values do not all fit the parameter's `+c.to.String()+" (some would be infinite)", "%v, chunk %d", c.to, chunk)
			require.Equal(t, want, paramBits(ps), "%v, chunk %d: a refused file changes nothing", c.to, chunk)
			require.Equal(t, inUse, m.InUse(), "%v, chunk %d: nothing left", c.to, chunk)
		}
	}
}

// TestLoadWeightsWithoutHostStaging: on a device whose staging memory
// the host cannot write (a GPU whose policy puts RoleStaging in device
// memory; a host manager pretends here), the tensors are uploaded whole,
// transposed by the host where the layout wants it, before anything
// changes: they load with the old path's bits, and running out of
// memory at any allocation of the load changes nothing and leaves
// nothing allocated.
func TestLoadWeightsWithoutHostStaging(t *testing.T) {
	asked := 0
	defer func(f func(*tensor.Tensor) []byte) { stagingHost = f }(stagingHost)
	stagingHost = func(*tensor.Tensor) []byte { asked++; return nil }
	vals := chunkValues(7)
	path := filepath.Join(t.TempDir(), "w.safetensors")
	require.NoError(t, SaveWeightsLayout(context.Background(), path, chunkParams(t, tensor.CPU(), tensor.Float32, vals), nil, LayoutHF))
	want := oldLoad(t, path, chunkParams(t, tensor.CPU(), tensor.Float16, vals), LayoutHF)
	m := memory.NewHostManager(memory.Config{})
	ps := chunkParams(t, tensor.NewCPUDevice(m), tensor.Float16, chunkValues(8))
	before := paramBits(ps)
	failed := 0
	for k := int64(1); ; k++ {
		inUse := m.InUse()
		m.FailAllocation(k)
		_, err := LoadWeights(path, ps)
		m.FailAllocation(0)
		require.Equal(t, inUse, m.InUse(), "allocation %d: nothing left", k)
		if err == nil {
			break
		}
		failed++
		require.ErrorIs(t, err, memory.ErrInjected, "allocation %d", k)
		require.Equal(t, before, paramBits(ps), "allocation %d: a failed load changes nothing", k)
	}
	require.Greater(t, failed, len(ps), "the whole uploads were among the allocations failed")
	require.Equal(t, want, paramBits(ps), "loaded without host staging")
	require.Positive(t, asked, "the staging buffers were asked for the host's view")
}

// TestLoadWeightsRefusesNonContiguous: a parameter whose values are a
// strided view (copyInto writes through a flat view, which a strided
// one cannot be) is refused before any parameter changes; the copy
// into it used to fail after the parameters before it had changed.
func TestLoadWeightsRefusesNonContiguous(t *testing.T) {
	path := filepath.Join(t.TempDir(), "w.safetensors")
	require.NoError(t, SaveWeights(path, chunkParams(t, tensor.CPU(), tensor.Float32, chunkValues(9)), nil))
	ps := chunkParams(t, tensor.CPU(), tensor.Float32, chunkValues(10))
	last := len(ps) - 1
	v, err := tensor.NewKept(tensor.CPU(), tensor.Float32, memory.RoleParameter, 7, 5) // chunkShapes' last, (5, 7), transposed
	require.NoError(t, err)
	defer v.Release()
	ps[last].Value.Release() // replaced by a view, which the cleanup releases
	ps[last] = &Parameter{Var: autograd.Param(v.T(), ps[last].Name), Name: ps[last].Name}
	before := paramBits(ps[:last])
	_, err = LoadWeights(path, ps)
	require.ErrorIs(t, err, tensor.ErrArgument)
	require.ErrorContains(t, err, `"transformer.lin.weight" is not contiguous`)
	require.Equal(t, before, paramBits(ps[:last]), "a refused load changes no parameter")
}
