package nccl

import (
	"fmt"
	"os"
	"sync"
	"testing"
	"unsafe"

	"github.com/strata-ml/strata/cuda"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// gpuContexts returns the primary contexts of the first n GPUs. It skips
// the test when the CUDA driver, a GPU or NCCL is missing, and fails
// instead when STRATA_REQUIRE_GPU is set; fewer than n GPUs (a one-GPU
// machine, for the multi-GPU tests) always skips.
func gpuContexts(t *testing.T, n int) []*cuda.Context {
	t.Helper()
	missing := func(format string, args ...any) {
		t.Helper()
		if os.Getenv("STRATA_REQUIRE_GPU") != "" {
			t.Fatalf("STRATA_REQUIRE_GPU is set: "+format, args...)
		}
		t.Skipf(format, args...)
	}
	if err := cuda.Init(); err != nil {
		missing("no CUDA driver: %v", err)
	}
	count, err := cuda.DeviceCount()
	require.NoError(t, err)
	if count == 0 {
		missing("the CUDA driver sees no device")
	}
	if err := Init(); err != nil {
		missing("no NCCL: %v", err)
	}
	if count < n {
		t.Skipf("needs %d GPUs, this machine has %d", n, count)
	}
	ctxs := make([]*cuda.Context, n)
	for i := range ctxs {
		ctxs[i], err = cuda.Device(i).PrimaryContext()
		require.NoError(t, err)
	}
	return ctxs
}

// allGPUs returns every GPU's context, or skips with fewer than two.
func allGPUs(t *testing.T) []*cuda.Context {
	t.Helper()
	gpuContexts(t, 1) // skip or fail for a missing driver, GPU or NCCL first
	n, err := cuda.DeviceCount()
	require.NoError(t, err)
	return gpuContexts(t, max(n, 2))
}

func f32bytes(v []float32) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 4*len(v))
}

// upload allocates device memory on c holding v, freed at the end of the
// test.
func upload(t *testing.T, c *cuda.Context, v []float32) cuda.DevicePtr {
	t.Helper()
	p, err := c.MemAlloc(4 * len(v))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.MemFree(p) })
	require.NoError(t, c.MemcpyHtoD(p, f32bytes(v)))
	require.NoError(t, c.Synchronize()) // the streams are non-blocking
	return p
}

func download(t *testing.T, c *cuda.Context, p cuda.DevicePtr, n int) []float32 {
	t.Helper()
	v := make([]float32, n)
	require.NoError(t, c.MemcpyDtoH(f32bytes(v), p))
	return v
}

func stream(t *testing.T, c *cuda.Context) *cuda.Stream {
	t.Helper()
	s, err := c.NewStream()
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Destroy() })
	return s
}

// ramp returns n values a, a+step, ...: small integers, exact in float32
// after any sum of a few ranks.
func ramp(n int, a, step float32) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = a + step*float32(i)
	}
	return v
}

// A 1-rank communicator on one GPU: each collective is a copy, which
// checks the binding end to end against the real library.
func TestGPUOneRank(t *testing.T) {
	ctx := gpuContexts(t, 1)[0]
	v, err := Version()
	require.NoError(t, err)
	require.GreaterOrEqual(t, v, 20000, "NCCL %s", VersionString(v))
	p, _ := LibraryPath()
	t.Logf("NCCL %s from %s", VersionString(v), p)

	id, err := GetUniqueID()
	require.NoError(t, err)
	require.NotEqual(t, UniqueID{}, id)
	var comm *Comm
	require.NoError(t, ctx.Do(func() (err error) { comm, err = CommInitRank(1, id, 0); return err }))
	defer func() { assert.NoError(t, comm.Destroy()) }()
	assert.Equal(t, 0, comm.Rank())
	assert.Equal(t, 1, comm.Count())
	assert.Equal(t, int(ctx.Device()), comm.Device())

	const n = 1 << 16
	want := ramp(n, -3, 0.25)
	send := upload(t, ctx, want)
	recv := upload(t, ctx, make([]float32, n))
	s := stream(t, ctx)
	for _, op := range []RedOp{Sum, Prod, Max, Min, Avg} {
		require.NoError(t, zero(t, ctx, recv, n))
		require.NoError(t, ctx.Do(func() error { return comm.AllReduce(send, recv, n, Float32, op, s) }))
		require.NoError(t, s.Synchronize())
		require.Equal(t, want, download(t, ctx, recv, n), "AllReduce %s", op)
	}
	for name, call := range map[string]func() error{
		"Broadcast":     func() error { return comm.Broadcast(send, recv, n, Float32, 0, s) },
		"AllGather":     func() error { return comm.AllGather(send, recv, n, Float32, s) },
		"ReduceScatter": func() error { return comm.ReduceScatter(send, recv, n, Float32, Sum, s) },
		"in place":      func() error { return comm.AllReduce(recv, recv, n, Float32, Sum, s) },
	} {
		if name != "in place" {
			require.NoError(t, zero(t, ctx, recv, n))
		}
		require.NoError(t, ctx.Do(call), name)
		require.NoError(t, s.Synchronize(), name)
		require.Equal(t, want, download(t, ctx, recv, n), name)
	}
	require.NoError(t, comm.AsyncError())

	// A misuse only NCCL can see is its *Error with its own text.
	err = ctx.Do(func() error { return comm.AllReduce(send, recv, n, BFloat16, Avg, s) })
	if v < 21000 {
		require.Error(t, err, "bfloat16 and avg need NCCL 2.10")
		t.Logf("NCCL %s: %v", VersionString(v), err)
	} else {
		require.NoError(t, err)
		require.NoError(t, s.Synchronize())
	}
}

// zero zeroes n float32 values at p.
func zero(t *testing.T, c *cuda.Context, p cuda.DevicePtr, n int) error {
	t.Helper()
	if err := c.MemcpyHtoD(p, f32bytes(make([]float32, n))); err != nil {
		return err
	}
	return c.Synchronize()
}

// Every GPU of the machine, communicators from CommInitAll, collectives
// from one goroutine in groups.
func TestGPUMultiCommInitAll(t *testing.T) {
	ctxs := allGPUs(t)
	nr := len(ctxs)
	devices := make([]int, nr)
	for i := range devices {
		devices[i] = i
	}
	comms, err := CommInitAll(devices)
	require.NoError(t, err)
	defer func() {
		for _, c := range comms {
			assert.NoError(t, c.Destroy())
		}
	}()
	streams := make([]*cuda.Stream, nr)
	for i, c := range comms {
		require.Equal(t, i, c.Rank())
		require.Equal(t, nr, c.Count())
		require.Equal(t, i, c.Device())
		streams[i] = stream(t, ctxs[i])
	}
	syncAll := func() {
		for _, s := range streams {
			require.NoError(t, s.Synchronize())
		}
	}
	const count = 4096

	// AllReduce, sum and average: rank i holds (i+1)*(j+1).
	sends := make([]cuda.DevicePtr, nr)
	recvs := make([]cuda.DevicePtr, nr)
	for i, ctx := range ctxs {
		sends[i] = upload(t, ctx, ramp(count, float32(i+1), float32(i+1)))
		recvs[i] = upload(t, ctx, make([]float32, count*nr))
	}
	tri := float32(nr * (nr + 1) / 2)
	for _, op := range []RedOp{Sum, Avg} {
		require.NoError(t, Group(func() error {
			for i, c := range comms {
				if err := c.AllReduce(sends[i], recvs[i], count, Float32, op, streams[i]); err != nil {
					return err
				}
			}
			return nil
		}))
		syncAll()
		scale := tri
		if op == Avg {
			scale = tri / float32(nr)
		}
		want := ramp(count, scale, scale)
		for i, ctx := range ctxs {
			got := download(t, ctx, recvs[i], count)
			if op == Sum {
				require.Equal(t, want, got, "AllReduce sum on rank %d", i)
				continue
			}
			for j := range got { // 1/nranks is inexact for 3, 5, 6, 7 ranks
				require.InEpsilon(t, want[j], got[j], 1e-6, "AllReduce avg on rank %d, element %d", i, j)
			}
		}
	}

	// ReduceScatter: rank i sends i + k over count*nr elements; rank r
	// gets block r of the sum.
	big := make([]cuda.DevicePtr, nr)
	for i, ctx := range ctxs {
		big[i] = upload(t, ctx, ramp(count*nr, float32(i), 1))
	}
	require.NoError(t, Group(func() error {
		for i, c := range comms {
			if err := c.ReduceScatter(big[i], recvs[i], count, Float32, Sum, streams[i]); err != nil {
				return err
			}
		}
		return nil
	}))
	syncAll()
	for r, ctx := range ctxs {
		want := ramp(count, tri-float32(nr)+float32(nr*r*count), float32(nr))
		require.Equal(t, want, download(t, ctx, recvs[r], count), "ReduceScatter rank %d", r)
	}

	// AllGather: rank i contributes 1000*i + j.
	for i, ctx := range ctxs {
		sends[i] = upload(t, ctx, ramp(count, float32(1000*i), 1))
	}
	require.NoError(t, Group(func() error {
		for i, c := range comms {
			if err := c.AllGather(sends[i], recvs[i], count, Float32, streams[i]); err != nil {
				return err
			}
		}
		return nil
	}))
	syncAll()
	var gathered []float32
	for i := range nr {
		gathered = append(gathered, ramp(count, float32(1000*i), 1)...)
	}
	for i, ctx := range ctxs {
		require.Equal(t, gathered, download(t, ctx, recvs[i], count*nr), "AllGather rank %d", i)
	}

	// Broadcast from the last rank; the others pass no send buffer.
	root := nr - 1
	require.NoError(t, Group(func() error {
		for i, c := range comms {
			send := cuda.DevicePtr(0)
			if i == root {
				send = sends[i]
			}
			if err := c.Broadcast(send, recvs[i], count, Float32, root, streams[i]); err != nil {
				return err
			}
		}
		return nil
	}))
	syncAll()
	for i, ctx := range ctxs {
		require.Equal(t, ramp(count, float32(1000*root), 1), download(t, ctx, recvs[i], count), "Broadcast rank %d", i)
	}

	// A stream of another device is refused before NCCL sees it.
	err = comms[0].AllReduce(sends[0], recvs[0], count, Float32, Sum, streams[1])
	require.ErrorIs(t, err, ErrInvalidArgument)
	assert.Contains(t, err.Error(), "the communicator on cuda:0")
}

// One goroutine per GPU, joined through GetUniqueID and CommInitRank, each
// issuing its own AllReduce: the layout of one process per GPU, in one
// process.
func TestGPUMultiCommInitRankGoroutines(t *testing.T) {
	ctxs := allGPUs(t)
	nr := len(ctxs)
	id, err := GetUniqueID()
	require.NoError(t, err)
	const count = 1 << 20
	sends := make([]cuda.DevicePtr, nr)
	recvs := make([]cuda.DevicePtr, nr)
	streams := make([]*cuda.Stream, nr)
	for i, ctx := range ctxs {
		sends[i] = upload(t, ctx, ramp(count, float32(i), 0))
		recvs[i] = upload(t, ctx, make([]float32, count))
		streams[i] = stream(t, ctx)
	}
	errs := make([]error, nr)
	var wg sync.WaitGroup
	for i, ctx := range ctxs {
		wg.Go(func() {
			errs[i] = ctx.Do(func() error {
				comm, err := CommInitRank(nr, id, i)
				if err != nil {
					return err
				}
				defer comm.Destroy()
				if comm.Rank() != i || comm.Count() != nr || comm.Device() != i {
					return fmt.Errorf("communicator %s, want rank %d of %d on cuda:%d", comm, i, nr, i)
				}
				for range 3 {
					if err := comm.AllReduce(sends[i], recvs[i], count, Float32, Max, streams[i]); err != nil {
						return err
					}
				}
				return streams[i].Synchronize()
			})
		})
	}
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "rank %d", i)
	}
	for i, ctx := range ctxs {
		got := download(t, ctx, recvs[i], count)
		require.Equal(t, float32(nr-1), got[0], "rank %d", i)
		require.Equal(t, float32(nr-1), got[count-1], "rank %d", i)
	}
}
