package cuda

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestGPUVectorAddKernel(t *testing.T) {
	c := gpuContext(t)
	m := loadPTX(t, c, ptxVectorAdd)
	assert.Equal(t, "PTX", m.Kind())
	fn, err := m.Function("vadd")
	require.NoError(t, err)
	if sizes := fn.ParamSizes(); sizes != nil {
		assert.Equal(t, []int{8, 8, 8, 4}, sizes)
	} else {
		t.Log("driver cannot report parameter sizes (cuFuncGetParamInfo needs CUDA 12.4)")
	}
	regs, err := fn.Attribute(FuncNumRegs)
	require.NoError(t, err)
	maxThreads, err := fn.Attribute(FuncMaxThreadsPerBlock)
	require.NoError(t, err)
	t.Logf("vadd: %d registers, up to %d threads per block", regs, maxThreads)

	const n = 1<<20 + 17
	r := rand.New(rand.NewPCG(3, 4))
	av, bv := make([]float32, n), make([]float32, n)
	for i := range av {
		av[i], bv[i] = r.Float32(), r.Float32()
	}
	a, b := deviceFloats(t, c, av), deviceFloats(t, c, bv)
	out, err := c.MemAlloc(n * 4)
	require.NoError(t, err)
	defer c.MemFree(out)
	grid, block := [3]uint32{(n + 255) / 256, 1, 1}, [3]uint32{256, 1, 1}

	check := func() {
		got := readFloats(t, c, out, n)
		bad := 0
		for i := range got {
			if got[i] != av[i]+bv[i] {
				bad++
			}
		}
		assert.Zero(t, bad, "wrong sums")
	}
	require.NoError(t, c.LaunchKernel(fn, grid, block, 0, nil, a, b, out, int32(n)))
	require.NoError(t, c.Synchronize())
	check()

	// The Args form, on a stream; inside Do a launch is exactly one
	// driver call (the context is already current on the locked thread).
	s, err := c.NewStream()
	require.NoError(t, err)
	defer s.Destroy()
	require.NoError(t, c.MemsetD8Async(out, 0, n*4, s))
	args, err := NewArgs()
	require.NoError(t, err)
	defer args.Free()
	var calls uint64
	require.NoError(t, c.Do(func() error {
		before := DriverCalls()
		err := c.LaunchKernelArgs(fn, grid, block, 0, s, args.Reset().Ptr(a).Ptr(b).Ptr(out).Int32(n))
		calls = DriverCalls() - before
		return err
	}))
	assert.Equal(t, uint64(1), calls, "driver calls per launch")
	require.NoError(t, s.Synchronize())
	check()

	if fn.ParamSizes() != nil {
		err = c.LaunchKernel(fn, grid, block, 0, nil, a, b, out, int64(n))
		assert.ErrorContains(t, err, "parameter 3 is 4 bytes, argument 4 is 8 bytes")
	}
	_, err = m.Function("no_such_kernel")
	var e *Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, "CUDA_ERROR_NOT_FOUND", e.Name)
	assert.Contains(t, e.Detail, `kernel "no_such_kernel"`)

	noop, err := m.Function("noop")
	require.NoError(t, err)
	require.NoError(t, c.LaunchKernel(noop, [3]uint32{1, 1, 1}, [3]uint32{1, 1, 1}, 0, nil))
	require.NoError(t, c.Synchronize())
}

// Every argument size reaches the kernel intact.
func TestGPUKernelArgumentMarshalling(t *testing.T) {
	c := gpuContext(t)
	fn, err := loadPTX(t, c, ptxProbe).Function("probe")
	require.NoError(t, err)
	if sizes := fn.ParamSizes(); sizes != nil {
		assert.Equal(t, []int{1, 2, 4, 8, 4, 8, 8}, sizes)
	}
	out, err := c.MemAlloc(48)
	require.NoError(t, err)
	defer c.MemFree(out)
	one := [3]uint32{1, 1, 1}
	require.NoError(t, c.LaunchKernel(fn, one, one, 0, nil,
		uint8(0xA5), uint16(0xBEEF), uint32(0xDEADBEEF), uint64(0x0123_4567_89AB_CDEF), float32(-1.25), math.Pi, out))
	require.NoError(t, c.Synchronize())
	raw := make([]byte, 48)
	require.NoError(t, c.MemcpyDtoH(raw, out))
	u := func(i int) uint64 {
		var v uint64
		for j := 7; j >= 0; j-- {
			v = v<<8 | uint64(raw[8*i+j])
		}
		return v
	}
	assert.Equal(t, uint64(0xA5), u(0))
	assert.Equal(t, uint64(0xBEEF), u(1))
	assert.Equal(t, uint64(0xDEADBEEF), u(2))
	assert.Equal(t, uint64(0x0123_4567_89AB_CDEF), u(3))
	assert.Equal(t, -1.25, math.Float64frombits(u(4)))
	assert.Equal(t, math.Pi, math.Float64frombits(u(5)))
}

func TestGPUModuleLoadErrors(t *testing.T) {
	c := gpuContext(t)
	_, err := c.ModuleLoadData([]byte(ptxBroken))
	var e *Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, "cuModuleLoadDataEx", e.Call)
	assert.Contains(t, []string{"CUDA_ERROR_INVALID_PTX", "CUDA_ERROR_INVALID_IMAGE"}, e.Name)
	assert.Contains(t, e.Detail, "JIT log:", "the compiler's message reaches the error")
	t.Log(err)
	_, err = c.ModuleLoadData([]byte("hello"))
	assert.ErrorIs(t, err, ErrInvalidValue)

	m := loadPTX(t, c, ptxVectorAdd)
	require.NoError(t, m.Unload())
	require.NoError(t, m.Unload(), "idempotent")
	_, err = m.Function("vadd")
	assert.ErrorContains(t, err, "module was unloaded")
}

// Every kind of call works on a thread where no context is current (the
// optimistic entry retries after cuCtxSetCurrent), and leaves it current.
func TestGPUThreadWithoutCurrentContext(t *testing.T) {
	c := gpuContext(t)
	for _, every := range []bool{false, true} {
		forceSetCurrent.Store(every)
		withoutCurrentContext(t, c, func() {
			p, err := c.MemAlloc(1 << 20)
			if !assert.NoError(t, err) {
				return
			}
			defer c.MemFree(p)
			src := []byte("no context was current on this thread")
			assert.NoError(t, c.MemcpyHtoD(p, src))
			got := make([]byte, len(src))
			assert.NoError(t, c.MemcpyDtoH(got, p))
			assert.Equal(t, src, got)
			f := getFrame()
			defer f.release()
			assert.Equal(t, uint32(0), uint32(f.call(c.drv.ctxGetCurrent.addr, f.outAddr(0))))
			assert.Equal(t, c.h, uintptr(f.out[0]), "the context is current afterwards")
		})
		withoutCurrentContext(t, c, func() {
			s, err := c.NewStream()
			if !assert.NoError(t, err) {
				return
			}
			defer s.Destroy()
			e, err := c.NewEvent(EventDefault)
			if !assert.NoError(t, err) {
				return
			}
			defer e.Destroy()
			assert.NoError(t, e.Record(s))
			assert.NoError(t, e.Synchronize())
		})
		withoutCurrentContext(t, c, func() {
			m, err := c.ModuleLoadData([]byte(ptxVectorAdd))
			if !assert.NoError(t, err) {
				return
			}
			defer m.Unload()
			fn, err := m.Function("noop")
			assert.NoError(t, err)
			assert.NoError(t, c.LaunchKernel(fn, [3]uint32{1, 1, 1}, [3]uint32{1, 1, 1}, 0, nil))
			assert.NoError(t, c.Synchronize())
			_, _, err = c.MemGetInfo()
			assert.NoError(t, err)
		})
	}
	forceSetCurrent.Store(false)
}

// With several contexts every entry sets the context first: two calls
// per launch.
func TestGPUSetEveryCallStrategy(t *testing.T) {
	c := gpuContext(t)
	fn, err := loadPTX(t, c, ptxVectorAdd).Function("noop")
	require.NoError(t, err)
	args, err := NewArgs()
	require.NoError(t, err)
	defer args.Free()
	forceSetCurrent.Store(true)
	defer forceSetCurrent.Store(false)
	before := DriverCalls()
	require.NoError(t, c.LaunchKernelArgs(fn, [3]uint32{1, 1, 1}, [3]uint32{1, 1, 1}, 0, nil, args.Reset()))
	assert.Equal(t, uint64(2), DriverCalls()-before)
	require.NoError(t, c.Synchronize())
}
