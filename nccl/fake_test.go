package nccl

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/ebitengine/purego"
	"github.com/strata-ml/strata/cuda"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeState mirrors struct fake_state in testdata/fakenccl.c.
type fakeState struct {
	nextResult int32
	calls      int32
	op         [32]byte
	args       [8]uint64
	id         [128]byte

	destroyUsleep int32 // how long ncclCommDestroy takes
	freedTwice    int32 // communicators destroyed or aborted twice
	attrResult    int32 // returned by the next ncclCommUserRank
	usedFreed     int32 // calls handed a communicator already freed
}

func (f *fakeState) lastOp() string {
	n := 0
	for n < len(f.op) && f.op[n] != 0 {
		n++
	}
	return string(f.op[:n])
}

// useFakeNCCL compiles testdata/fakenccl.c with the system C compiler,
// loads it as NCCL through STRATA_NCCL_LIB, and makes it the package's
// library for the rest of the test. It skips without a C compiler.
func useFakeNCCL(t *testing.T) *fakeState {
	t.Helper()
	if !platformSupported || (runtime.GOARCH != "amd64" && runtime.GOARCH != "arm64") {
		t.Skip("linux on amd64 or arm64 only")
	}
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skip("no C compiler to build the fake NCCL")
	}
	so := filepath.Join(t.TempDir(), "libnccl-fake.so.2")
	if out, err := exec.Command(cc, "-shared", "-fPIC", "-O1", "-o", so, "testdata/fakenccl.c").CombinedOutput(); err != nil {
		t.Fatalf("building the fake NCCL: %v\n%s", err, out)
	}
	l, err := load(env(map[string]string{EnvNCCLLib: so}), nil)
	require.NoError(t, err)
	assert.Equal(t, so, l.path)

	getLib() // consume the once, then swap the library in
	saved, savedErr := state.lib, state.err
	state.lib, state.err = l, nil
	t.Cleanup(func() { state.lib, state.err = saved, savedErr })

	h, err := purego.Dlopen(so, purego.RTLD_NOW|purego.RTLD_LOCAL)
	require.NoError(t, err)
	get, err := purego.Dlsym(h, "fake_get")
	require.NoError(t, err)
	r, _, _ := purego.SyscallN(get)
	return (*fakeState)(addrPointer(r))
}

func TestFakeVersionAndUniqueID(t *testing.T) {
	f := useFakeNCCL(t)
	v, err := Version()
	require.NoError(t, err)
	assert.Equal(t, 22304, v)
	assert.Equal(t, "2.23.4", VersionString(v))
	p, err := LibraryPath()
	require.NoError(t, err)
	assert.Contains(t, p, "libnccl-fake.so.2")

	id, err := GetUniqueID()
	require.NoError(t, err)
	for i := range id {
		require.Equal(t, byte(i*7+1), id[i], "byte %d", i)
	}
	f.nextResult = int32(SystemError)
	_, err = GetUniqueID()
	var e *Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, "ncclGetUniqueId", e.Op)
	assert.Equal(t, SystemError, e.Code)
	assert.Equal(t, "nccl: ncclGetUniqueId: ncclSystemError (2): unknown: fake: the last error", err.Error())
}

// The 128-byte ncclUniqueId is passed by value: the fake receives every
// byte, and the ints around it land in their registers.
func TestFakeCommInitRankPassesIDByValue(t *testing.T) {
	f := useFakeNCCL(t)
	var id UniqueID
	for i := range id {
		id[i] = byte(255 - i)
	}
	c, err := CommInitRank(5, id, 3)
	require.NoError(t, err)
	assert.Equal(t, "ncclCommInitRank", f.lastOp())
	assert.Equal(t, [128]byte(id), f.id)
	assert.Equal(t, uint64(5), f.args[0], "nranks")
	assert.Equal(t, uint64(3), f.args[1], "rank")
	assert.Equal(t, 3, c.Rank())
	assert.Equal(t, 5, c.Count())
	assert.Equal(t, 3, c.Device())
	assert.Equal(t, "rank 3 of 5 (cuda:3)", c.String())
	require.NoError(t, c.Destroy())
	assert.Equal(t, "ncclCommDestroy", f.lastOp())
	calls := f.calls
	require.NoError(t, c.Destroy())
	assert.Equal(t, calls, f.calls, "a second Destroy does not call NCCL")

	f.nextResult = int32(InvalidArgument)
	_, err = CommInitRank(2, id, 1)
	require.ErrorIs(t, err, ErrInvalidArgument)
	assert.Equal(t, "nccl: ncclCommInitRank (rank 1 of 2): ncclInvalidArgument (4): "+
		"invalid argument (run with NCCL_DEBUG=WARN for details): fake: the last error", err.Error())
}

// A communicator NCCL made but whose rank, size or device could not be
// read is destroyed, not leaked, before CommInitRank returns the error.
func TestFakeCommInitRankFreesOnAttributeError(t *testing.T) {
	f := useFakeNCCL(t)
	var id UniqueID
	id[0] = 1
	f.attrResult = int32(InternalError)
	c, err := CommInitRank(2, id, 1)
	require.Error(t, err)
	assert.Nil(t, c)
	assert.Contains(t, err.Error(), "ncclCommUserRank")
	assert.Equal(t, "ncclCommDestroy", f.lastOp(), "the communicator is destroyed")
	assert.Zero(t, f.freedTwice)
}

func TestFakeCommInitAll(t *testing.T) {
	f := useFakeNCCL(t)
	comms, err := CommInitAll([]int{2, 0, 1})
	require.NoError(t, err)
	require.Len(t, comms, 3)
	for i, d := range []int{2, 0, 1} {
		assert.Equal(t, i, comms[i].Rank())
		assert.Equal(t, 3, comms[i].Count())
		assert.Equal(t, d, comms[i].Device())
		require.NoError(t, comms[i].Destroy())
	}
	f.nextResult = int32(UnhandledCudaError)
	_, err = CommInitAll([]int{0})
	assert.ErrorContains(t, err, "nccl: ncclCommInitAll (devices [0]): ncclUnhandledCudaError (1)")
}

// Each collective hands NCCL its arguments in the C order, the stream
// handle last (0 for the default stream).
func TestFakeCollectives(t *testing.T) {
	f := useFakeNCCL(t)
	c, err := CommInitRank(2, UniqueID{9}, 1)
	require.NoError(t, err)
	defer c.Destroy()
	const p, q = cuda.DevicePtr(0x7f0000), cuda.DevicePtr(0x7f1000)
	h := uint64(c.h)

	require.NoError(t, c.AllReduce(p, q, 1<<40, BFloat16, Avg, nil))
	assert.Equal(t, "ncclAllReduce", f.lastOp())
	assert.Equal(t, [8]uint64{0x7f0000, 0x7f1000, 1 << 40, 9, 4, h, 0, 0}, f.args)

	require.NoError(t, c.ReduceScatter(p, q, 7, Float32, Max, nil))
	assert.Equal(t, "ncclReduceScatter", f.lastOp())
	assert.Equal(t, [8]uint64{0x7f0000, 0x7f1000, 7, 7, 2, h, 0, 0}, f.args)

	require.NoError(t, c.AllGather(p, q, 3, Int64, nil))
	assert.Equal(t, "ncclAllGather", f.lastOp())
	assert.Equal(t, [8]uint64{0x7f0000, 0x7f1000, 3, 4, h, 0, 0, 0}, f.args)

	require.NoError(t, c.Broadcast(0, q, 5, Float16, 0, nil), "send may be 0 off the root")
	assert.Equal(t, "ncclBroadcast", f.lastOp())
	assert.Equal(t, [8]uint64{0, 0x7f1000, 5, 6, 0, h, 0, 0}, f.args)

	require.NoError(t, c.AllReduce(p, p, 0, Float32, Sum, nil), "in place, zero elements")

	f.nextResult = int32(InvalidUsage)
	err = c.AllReduce(p, q, 16, Float32, Sum, nil)
	require.ErrorIs(t, err, ErrInvalidArgument)
	assert.Equal(t, "nccl: ncclAllReduce (16 float32 sum, rank 1 of 2 (cuda:1)): ncclInvalidUsage (5): unknown: fake: the last error", err.Error())

	require.NoError(t, c.AsyncError())
	f.nextResult = int32(RemoteError)
	assert.ErrorContains(t, c.AsyncError(), "nccl: asynchronous error (rank 1 of 2 (cuda:1)): ncclRemoteError (6)")
}

func TestFakeGroup(t *testing.T) {
	f := useFakeNCCL(t)
	c, err := CommInitRank(1, UniqueID{1}, 0)
	require.NoError(t, err)
	defer c.Destroy()
	var ops []string
	require.NoError(t, Group(func() error {
		ops = append(ops, f.lastOp())
		err := c.AllReduce(1, 1, 1, Float32, Sum, nil)
		ops = append(ops, f.lastOp())
		return err
	}))
	ops = append(ops, f.lastOp())
	assert.Equal(t, []string{"ncclGroupStart", "ncclAllReduce", "ncclGroupEnd"}, ops)

	// fn's error is returned, and the group is still closed.
	err = Group(func() error { return c.AllReduce(1, 1, -1, Float32, Sum, nil) })
	assert.ErrorContains(t, err, "negative count")
	assert.Equal(t, "ncclGroupEnd", f.lastOp())

	// fn's panic goes on, and the group is still closed: the thread,
	// back in the pool, holds no open group.
	assert.PanicsWithValue(t, "fn failed", func() {
		_ = Group(func() error { panic("fn failed") })
	})
	assert.Equal(t, "ncclGroupEnd", f.lastOp())

	f.nextResult = int32(InternalError)
	assert.ErrorContains(t, GroupStart(), "nccl: ncclGroupStart: ncclInternalError (3)")
	f.nextResult = int32(InternalError)
	assert.ErrorContains(t, GroupEnd(), "nccl: ncclGroupEnd: ncclInternalError (3)")
}

// Abort calls ncclCommAbort once; the communicator refuses every later
// call, and Destroy after it does nothing.
func TestFakeAbort(t *testing.T) {
	f := useFakeNCCL(t)
	c, err := CommInitRank(2, UniqueID{3}, 0)
	require.NoError(t, err)
	require.False(t, c.Aborted())
	require.NoError(t, c.Abort())
	assert.Equal(t, "ncclCommAbort", f.lastOp())
	assert.True(t, c.Aborted())
	calls := f.calls
	require.NoError(t, c.Abort(), "a second Abort is a no-op")
	require.NoError(t, c.Destroy(), "Destroy after Abort is a no-op")
	assert.Equal(t, calls, f.calls, "neither calls NCCL")
	err = c.AllReduce(1, 1, 4, Float32, Sum, nil)
	require.ErrorIs(t, err, ErrInvalidArgument)
	assert.Contains(t, err.Error(), "rank 0 of 2 (cuda:0) was aborted")
	assert.ErrorContains(t, c.AsyncError(), "was aborted")

	// A destroyed communicator is not aborted again.
	d, err := CommInitRank(1, UniqueID{4}, 0)
	require.NoError(t, err)
	require.NoError(t, d.Destroy())
	calls = f.calls
	require.NoError(t, d.Abort())
	assert.Equal(t, calls, f.calls)

	// NCCL's failure is its *Error.
	e, err := CommInitRank(1, UniqueID{5}, 0)
	require.NoError(t, err)
	f.nextResult = int32(InternalError)
	assert.ErrorContains(t, e.Abort(), "nccl: ncclCommAbort (rank 0 of 1 (cuda:0)): ncclInternalError (3)")
	var nilComm *Comm
	assert.ErrorIs(t, nilComm.Abort(), ErrInvalidArgument)
}

// TestFakeVersionFailureNotAvailable: a library whose ncclGetVersion
// fails does not load, and the error wraps ErrNotAvailable (as every
// load failure does: Init's doc) besides the *Error with NCCL's code; it
// was the bare *Error.
func TestFakeVersionFailureNotAvailable(t *testing.T) {
	f := useFakeNCCL(t)
	so := state.lib.path
	f.nextResult = int32(InternalError)
	_, err := load(env(map[string]string{EnvNCCLLib: so}), nil)
	require.Error(t, err)
	assert.ErrorIs(t, err, ErrNotAvailable)
	var ne *Error
	require.ErrorAs(t, err, &ne)
	assert.Equal(t, InternalError, ne.Code)
	assert.Contains(t, err.Error(), "ncclGetVersion")
	assert.Contains(t, err.Error(), so)
}
