package memory_test

import (
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/cuda"
	"github.com/strata-ml/strata/memory"
)

// ptxSpin: spin(const volatile unsigned* flag, unsigned long long timeout_ns)
// returns once *flag is non-zero, or after timeout_ns of GPU time, so a
// failed test can never leave the GPU spinning. The flag lives in mapped
// host memory: the host releases the kernel by writing it.
const ptxSpin = `
.version 8.0
.target sm_80
.address_size 64

.visible .entry spin(
	.param .u64 spin_flag,
	.param .u64 spin_timeout
)
{
	.reg .pred 	%p<3>;
	.reg .b32 	%r<2>;
	.reg .b64 	%rd<6>;

	ld.param.u64 	%rd1, [spin_flag];
	ld.param.u64 	%rd2, [spin_timeout];
	cvta.to.global.u64 	%rd3, %rd1;
	mov.u64 	%rd4, %globaltimer;
$L__loop:
	ld.volatile.global.u32 	%r1, [%rd3];
	setp.ne.s32 	%p1, %r1, 0;
	@%p1 bra 	$L__done;
	mov.u64 	%rd5, %globaltimer;
	sub.s64 	%rd5, %rd5, %rd4;
	setp.lt.u64 	%p2, %rd5, %rd2;
	@%p2 bra 	$L__loop;
$L__done:
	ret;
}
`

// spinner keeps a stream busy until the test releases it: a stream whose
// work is certainly not done, without depending on timing.
type spinner struct {
	c    *cuda.Context
	fn   *cuda.Function
	flag *uint32 // in mapped host memory
	dev  cuda.DevicePtr
}

func newSpinner(t *testing.T, c *cuda.Context) *spinner {
	t.Helper()
	mod, err := c.ModuleLoadData([]byte(ptxSpin))
	require.NoError(t, err)
	fn, err := mod.Function("spin")
	require.NoError(t, err)
	hp, host, err := c.MemHostAlloc(4, cuda.HostAllocDeviceMap|cuda.HostAllocPortable)
	require.NoError(t, err)
	dev, err := c.MemHostGetDevicePointer(hp)
	require.NoError(t, err)
	s := &spinner{c: c, fn: fn, flag: (*uint32)(unsafe.Pointer(&host[0])), dev: dev}
	t.Cleanup(func() {
		s.release() // whatever happened, never leave a kernel spinning
		assert.NoError(t, c.Synchronize())
		assert.NoError(t, c.MemFreeHost(hp))
		assert.NoError(t, mod.Unload())
	})
	return s
}

// block queues a spinning kernel on st: work queued on st after it waits
// until release.
func (s *spinner) block(t *testing.T, st *cuda.Stream) {
	t.Helper()
	atomic.StoreUint32(s.flag, 0)
	const timeout = uint64(20 * time.Second)
	require.NoError(t, s.c.LaunchKernel(s.fn, [3]uint32{1, 1, 1}, [3]uint32{1, 1, 1}, 0, st, s.dev, timeout))
}

func (s *spinner) release() { atomic.StoreUint32(s.flag, 1) }

// streamsManager returns a CUDA manager with a CUDAStreams of the test's,
// two registered streams and their Streams. Its device tier plans no
// steps: the tests follow best fit's reuse of the block just freed (step
// plans put small requests after the highest live block between plans).
func streamsManager(t *testing.T, c *cuda.Context) (m *memory.Manager, cs *memory.CUDAStreams, s1, s2 *cuda.Stream, id1, id2 memory.Stream) {
	t.Helper()
	cs = memory.NewCUDAStreams(c)
	m, err := memory.NewCUDAManager(c, memory.Config{StreamSync: cs, PlanSteps: memory.PlanNone})
	require.NoError(t, err)
	s1, err = c.NewStream()
	require.NoError(t, err)
	s2, err = c.NewStream()
	require.NoError(t, err)
	t.Cleanup(func() {
		assert.NoError(t, m.Close())
		assert.NoError(t, cs.Close(), "after the manager: its tokens are released")
		for _, s := range []*cuda.Stream{s1, s2} {
			cs.Forget(s)
			assert.NoError(t, s.Destroy())
		}
	})
	id1, err = cs.Stream(s1)
	require.NoError(t, err)
	id2, err = cs.Stream(s2)
	require.NoError(t, err)
	return m, cs, s1, s2, id1, id2
}

func TestGPURecordStream(t *testing.T) {
	c := gpuContext(t)
	m, cs, _, s2, id1, id2 := streamsManager(t, c)
	sp := newSpinner(t, c)
	alloc := func() *memory.Allocation {
		a, err := m.AllocStream(MiB, memory.RoleActivation, id1)
		require.NoError(t, err)
		return a
	}

	// Without RecordStream a block freed on its stream is reused at once:
	// the hazard, had another stream still been using it.
	a := alloc()
	addr := a.Addr()
	require.NoError(t, a.Free())
	b := alloc()
	require.Equal(t, addr, b.Addr())
	require.NoError(t, b.Free())

	// With it: s2 is held busy, then will write 0x77 over a's memory.
	a = alloc()
	require.Equal(t, addr, a.Addr())
	sp.block(t, s2)
	require.NoError(t, c.MemsetD8Async(cuda.DevicePtr(a.Addr()), 0x77, int(MiB), s2))
	require.NoError(t, m.RecordStream(a, id2))
	require.NoError(t, a.Free())
	st := m.Stats().Tiers[memory.TierDevice]
	assert.Zero(t, st.Allocated.Current)
	assert.Equal(t, MiB, st.Active.Current, "the freed block is active while s2's work may use it")

	b = alloc()
	assert.NotEqual(t, addr, b.Addr(), "the block must not be reused while s2 has not run its work")
	done, err := s2.Query()
	require.NoError(t, err)
	require.False(t, done, "s2 is still held by the spinning kernel, so the check above meant something")
	require.NoError(t, c.MemsetD8(cuda.DevicePtr(b.Addr()), 0x11, int(MiB)))

	sp.release()
	require.NoError(t, s2.Synchronize())
	c2 := alloc()
	assert.Equal(t, addr, c2.Addr(), "once s2's work is done the block is reused")
	assert.Equal(t, -1, firstNot(readDevice(t, c, c2.Addr(), int(MiB)), 0x77), "s2's late write landed in memory no one else was given")
	assert.Equal(t, -1, firstNot(readDevice(t, c, b.Addr(), int(MiB)), 0x11), "and the block handed out meanwhile was untouched")
	st = m.Stats().Tiers[memory.TierDevice]
	assert.Equal(t, st.Allocated.Current, st.Active.Current)
	made, free := cs.Events()
	assert.Equal(t, 1, made)
	assert.Equal(t, 1, free, "the event went back to the free list")
	require.NoError(t, b.Free())
	require.NoError(t, c2.Free())
}

func TestGPURecordStreamEmptyCacheWaits(t *testing.T) {
	c := gpuContext(t)
	m, _, _, s2, id1, id2 := streamsManager(t, c)
	sp := newSpinner(t, c)
	a, err := m.AllocStream(30*MiB, memory.RoleActivation, id1)
	require.NoError(t, err)
	sp.block(t, s2)
	require.NoError(t, c.MemsetD8Async(cuda.DevicePtr(a.Addr()), 1, int(30*MiB), s2))
	require.NoError(t, m.RecordStream(a, id2))
	require.NoError(t, a.Free())

	const hold = 300 * time.Millisecond
	time.AfterFunc(hold, sp.release)
	start := time.Now()
	require.NoError(t, m.EmptyCache())
	assert.GreaterOrEqual(t, time.Since(start), hold*2/3, "EmptyCache waited for s2 before giving the memory back")
	st := m.Stats().Tiers[memory.TierDevice]
	assert.Zero(t, st.Reserved.Current, "then released the segment")
	assert.Zero(t, st.Active.Current)
}

func TestGPUCUDAStreams(t *testing.T) {
	c := gpuContext(t)
	cs := memory.NewCUDAStreams(c)
	s, err := c.NewStream()
	require.NoError(t, err)
	defer func() { require.NoError(t, s.Destroy()) }()

	id, err := cs.Stream(nil)
	require.NoError(t, err)
	assert.Zero(t, id, "nil is the default stream")
	id, err = cs.Stream(s)
	require.NoError(t, err)
	assert.Equal(t, memory.Stream(s.Handle()), id)
	got, err := cs.CUDA(id)
	require.NoError(t, err)
	assert.Same(t, s, got)
	_, err = cs.CUDA(id + 8)
	require.ErrorIs(t, err, memory.ErrInvalidArgument)
	assert.Contains(t, err.Error(), "CUDAStreams.Stream")

	tok, err := cs.RecordEvent(id)
	require.NoError(t, err)
	require.NoError(t, cs.Wait(tok))
	assert.True(t, cs.Done(tok))
	cs.Release(tok)
	tok2, err := cs.RecordEvent(0)
	require.NoError(t, err)
	assert.Equal(t, tok, tok2, "a released event is reused")
	require.NoError(t, c.Synchronize())
	assert.True(t, cs.Done(tok2))
	cs.Release(tok2)
	made, free := cs.Events()
	assert.Equal(t, 1, made)
	assert.Equal(t, 1, free)

	// A prefetch on a stream the table does not know is refused.
	m, err := memory.NewCUDAManager(c, memory.Config{StreamSync: cs})
	require.NoError(t, err)
	f, err := m.AllocStream(MiB, memory.RoleFrozenWeight, id)
	require.NoError(t, err, "a frozen weight prefetched on a registered stream")
	require.NoError(t, f.Free())
	cs.Forget(s)
	_, err = m.AllocStream(MiB, memory.RoleFrozenWeight, id)
	require.ErrorIs(t, err, memory.ErrInvalidArgument, "the stream was forgotten")
	require.NoError(t, m.Close())

	require.NoError(t, cs.Close())
	_, err = cs.RecordEvent(0)
	require.ErrorIs(t, err, memory.ErrClosed)
}
