package tensor_test

import (
	"hash/fnv"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/tensor"
)

// The device-conformance suite: every op runs on every available device
// (the CPU always, cuda:0 when tensor.CUDA(0) works; the CUDA subtests
// skip with the reason otherwise, and fail when STRATA_REQUIRE_GPU is
// set). Each result is compared with the CPU's in the same dtype and with
// a float64 reference computed on the CPU from the same inputs.

// TestCUDAConformance runs the whole suite: every group on the CPU and on
// cuda:0. Its name keeps it in `make test-gpu`; the CPU halves run in CI.
func TestCUDAConformance(t *testing.T) {
	t.Run("OpsCopiesAndViews", testOpsCopiesAndViews)
	t.Run("OpsUnary", testOpsUnary)
	t.Run("OpsAffineAndBinary", testOpsAffineAndBinary)
	t.Run("OpsReductions", testOpsReductions)
	t.Run("OpsMatMul", testOpsMatMul)
	t.Run("OpsNN", testOpsNN)
	t.Run("CastsBitExact", testCastsBitExact)
	t.Run("CopiesBetweenDevices", testCopiesBetweenDevices)
	t.Run("BadIndicesAreErrors", testBadIndicesAreErrors)
	t.Run("UnsupportedDTypesAreErrors", testUnsupportedDTypesAreErrors)
}

var gpu struct {
	once sync.Once
	dev  tensor.Device
	err  error
}

// cudaOrSkip returns cuda:0, or skips the test with the reason.
func cudaOrSkip(t testing.TB) tensor.Device {
	t.Helper()
	gpu.once.Do(func() { gpu.dev, gpu.err = tensor.CUDA(0) })
	if gpu.err != nil {
		if os.Getenv("STRATA_REQUIRE_GPU") != "" {
			t.Fatalf("STRATA_REQUIRE_GPU is set, but cuda:0 is unavailable: %v", gpu.err)
		}
		t.Skipf("no CUDA device: %v", gpu.err)
	}
	return gpu.dev
}

// onDevices runs fn as a subtest per device.
func onDevices(t *testing.T, fn func(t *testing.T, dev tensor.Device)) {
	t.Run("cpu", func(t *testing.T) { fn(t, tensor.CPU()) })
	t.Run("cuda", func(t *testing.T) { fn(t, cudaOrSkip(t)) })
}

// env is what an op case builds its inputs from. rng is seeded by the
// case's name, so every device and dtype sees the same inputs; values are
// rounded to float32 precision, so the float32 run and the float64
// reference compute on identical numbers.
type env struct {
	dev tensor.Device
	dt  tensor.DType
	rng *rand.Rand
}

func (e *env) vals(v []float64, shape ...int) *tensor.Tensor {
	return tensor.FromFloats(e.dev, e.dt, v, shape...)
}

func (e *env) gen(f func() float64, shape []int) *tensor.Tensor {
	n := 1
	for _, d := range shape {
		n *= d
	}
	v := make([]float64, n)
	for i := range v {
		v[i] = float64(float32(f()))
	}
	return e.vals(v, shape...)
}

// randn: normal(0, 1) values.
func (e *env) randn(shape ...int) *tensor.Tensor { return e.gen(e.rng.NormFloat64, shape) }

// uniform: values in [lo, hi).
func (e *env) uniform(lo, hi float64, shape ...int) *tensor.Tensor {
	return e.gen(func() float64 { return lo + (hi-lo)*e.rng.Float64() }, shape)
}

// ids: int32 values in [0, n).
func (e *env) ids(n int, shape ...int) *tensor.Tensor {
	c := 1
	for _, d := range shape {
		c *= d
	}
	v := make([]int32, c)
	for i := range v {
		v[i] = int32(e.rng.IntN(n))
	}
	return tensor.FromInt32s(e.dev, v, shape...)
}

// opCase is one entry of the suite.
type opCase struct {
	name string
	// tol is the relative error bound of float32 results, against the
	// float64 reference and against the CPU's float32 (float64 results:
	// 1e-12). Errors are measured against |want| + floor*max|want|.
	tol, floor float64
	// exact: the result equals the CPU's bit for bit in every dtype.
	exact bool
	run   func(e *env) []*tensor.Tensor
}

type result struct {
	vals [][]float64
	raw  [][]byte
}

func caseSeed(name string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(name))
	return h.Sum64()
}

// eval runs c on dev in dt and copies the outputs to the host. It also
// checks that the device's memory in use returns to where it was.
func eval(t *testing.T, c opCase, dev tensor.Device, dt tensor.DType) result {
	t.Helper()
	var r result
	before := dev.Memory().InUse()
	err := tensor.Try(func() {
		tensor.WithScope(func() {
			e := &env{dev: dev, dt: dt, rng: rand.New(rand.NewPCG(caseSeed(c.name), 7))}
			for _, o := range c.run(e) {
				r.vals = append(r.vals, o.Float64s())
				r.raw = append(r.raw, o.RawBytes())
			}
		})
	})
	require.NoError(t, err, "%s on %v in %v", c.name, dev, dt)
	require.NoError(t, dev.Synchronize())
	require.Equal(t, before, dev.Memory().InUse(), "%s on %v in %v: memory in use changed", c.name, dev, dt)
	return r
}

// closeTo compares got with want: NaN never passes, equal values (also
// infinities) always do, others need |got-want| <= tol*(|want| + floor*max|want|).
func closeTo(t *testing.T, what string, got, want []float64, tol, floor float64) {
	t.Helper()
	require.Len(t, got, len(want), what)
	var scale float64
	for _, w := range want {
		if !math.IsInf(w, 0) {
			scale = max(scale, math.Abs(w))
		}
	}
	worst, at := 0.0, -1
	for i, g := range got {
		w := want[i]
		if math.IsNaN(g) || math.IsNaN(w) {
			require.Failf(t, "NaN", "%s: element %d is %v, want %v", what, i, g, w)
		}
		if g == w {
			continue
		}
		if e := math.Abs(g-w) / (math.Abs(w) + floor*scale); e > worst || math.IsNaN(e) {
			worst, at = e, i
		}
	}
	if worst > tol || at >= 0 && math.IsInf(got[at], 0) {
		require.Failf(t, "values differ", "%s: element %d is %v, want %v (relative error %.3g > %.3g)", what, at, got[at], want[at], worst, tol)
	}
}

// runSuite runs every case on every device in float32 and float64.
func runSuite(t *testing.T, cases []opCase) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ref := eval(t, c, tensor.CPU(), tensor.Float64)
			onDevices(t, func(t *testing.T, dev tensor.Device) {
				for _, dt := range []tensor.DType{tensor.Float32, tensor.Float64} {
					got := eval(t, c, dev, dt)
					cpu := got
					if dev != tensor.CPU() {
						cpu = eval(t, c, tensor.CPU(), dt)
					}
					tol, floor := c.tol, c.floor
					if tol == 0 {
						tol = 1e-6
					}
					if floor == 0 {
						floor = 1e-2
					}
					if dt == tensor.Float64 {
						tol = 1e-12
					}
					for i := range got.vals {
						closeTo(t, c.name+" "+dt.String()+" vs float64 reference, output "+strconv.Itoa(i), got.vals[i], ref.vals[i], tol, floor)
						if c.exact {
							require.Equal(t, cpu.raw[i], got.raw[i], "%s %v output %d: not bit-identical to the cpu", c.name, dt, i)
						} else {
							closeTo(t, c.name+" "+dt.String()+" vs cpu, output "+strconv.Itoa(i), got.vals[i], cpu.vals[i], tol, floor)
						}
					}
				}
			})
		})
	}
}
