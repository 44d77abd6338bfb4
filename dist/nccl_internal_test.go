package dist

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/nn"
	"github.com/strata-ml/strata/tensor"
)

// fakeNCCLGroup is a group of n ranks on dev with no communicators: what
// the checks made before any NCCL call see, on the CPU.
func fakeNCCLGroup(n int, dev tensor.Device) *NCCLGroup {
	g := &NCCLGroup{calls: map[int]*ncclSig{}}
	for i := range n {
		g.ranks = append(g.ranks, &ncclRank{g: g, rank: i, dev: dev})
	}
	return g
}

func TestNewNCCLGroupErrors(t *testing.T) {
	_, err := NewNCCLGroup(nil)
	require.ErrorIs(t, err, tensor.ErrArgument)
	assert.Contains(t, err.Error(), "no devices")

	_, err = NewNCCLGroup([]tensor.Device{tensor.CPU()})
	require.ErrorIs(t, err, tensor.ErrDevice)
	assert.Contains(t, err.Error(), "rank 0: cpu is not a CUDA device")
	assert.Contains(t, err.Error(), "NewLocalGroup")
}

// Every bad call is refused with an error naming the call, the rank and
// the problem, and fails the group: later calls on any rank return an
// error wrapping ErrAborted and the cause.
func TestNCCLRankChecks(t *testing.T) {
	cpu := tensor.CPU()
	x := tensor.FromFloat32s(cpu, []float32{1, 2, 3, 4, 5}, 5)
	defer x.Release()
	rel := tensor.FromFloat32s(cpu, []float32{1}, 1)
	rel.Release()

	cases := []struct {
		name string
		dev  tensor.Device
		call func(c Collective) error
		is   error
		msg  string
	}{
		{"nil", cpu, func(c Collective) error { return c.AllReduceSum(nil) }, tensor.ErrArgument, "AllReduceSum: rank 1: nil or released tensor"},
		{"released", cpu, func(c Collective) error { return c.AllGather(rel) }, tensor.ErrArgument, "AllGather: rank 1: nil or released tensor"},
		{"other device", nil, func(c Collective) error { return c.AllReduceSum(x) }, tensor.ErrDevice, "tensor float32 [5] is on cpu, the rank's GPU is"},
		{"not divisible", cpu, func(c Collective) error { return c.ReduceScatterSum(x) }, ErrMismatch, "ReduceScatterSum: rank 1: 5 elements are not divisible by the 2 ranks"},
		{"not CUDA", cpu, func(c Collective) error { return c.AllReduceSum(x) }, tensor.ErrDevice, "AllReduceSum: rank 1: tensor.CUDAPointer"},
		{"start nil", cpu, func(c Collective) error { _, err := c.(AsyncCollective).StartAllReduceSum(nil); return err }, tensor.ErrArgument, "AllReduceSum: rank 1: nil or released tensor"},
		{"start other device", nil, func(c Collective) error { _, err := c.(AsyncCollective).StartAllReduceSum(x); return err }, tensor.ErrDevice, "the rank's GPU is"},
		{"start not CUDA", cpu, func(c Collective) error { _, err := c.(AsyncCollective).StartAllReduceSum(x); return err }, tensor.ErrDevice, "AllReduceSum: rank 1: tensor.CUDAPointer"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := fakeNCCLGroup(2, tc.dev)
			err := tc.call(g.Rank(1))
			require.ErrorIs(t, err, tc.is)
			assert.Contains(t, err.Error(), tc.msg)
			require.ErrorIs(t, g.Err(), ErrAborted, "the group failed")
			require.ErrorIs(t, g.Err(), tc.is, "with the cause")
			// rank 0's next call, whatever it is, finds the group failed
			err = g.ranks[0].agree(opAllReduce, x)
			require.ErrorIs(t, err, ErrAborted)
			assert.Contains(t, err.Error(), "rank 1")
		})
	}
}

// The ranks' calls are compared in order: a rank running ahead is fine,
// a call that differs (operation, dtype, size) is ErrMismatch naming both
// ranks' calls; records are dropped once every rank made the call.
func TestNCCLAgree(t *testing.T) {
	cpu := tensor.CPU()
	a := tensor.FromFloat32s(cpu, []float32{1, 2, 3, 4}, 4)
	b := tensor.FromFloat32s(cpu, []float32{1, 2, 3, 4, 5, 6}, 6)
	d := tensor.FromFloats(cpu, tensor.Float64, []float64{1, 2, 3, 4}, 4)
	defer func() { a.Release(); b.Release(); d.Release() }()

	g := fakeNCCLGroup(3, cpu)
	r0, r1, r2 := g.ranks[0], g.ranks[1], g.ranks[2]
	require.NoError(t, r0.agree(opAllReduce, a))
	require.NoError(t, r0.agree(opAllGather, b)) // rank 0 runs ahead
	require.NoError(t, r1.agree(opAllReduce, a))
	require.NoError(t, r2.agree(opAllReduce, a))
	assert.Len(t, g.calls, 1, "call 1 dropped once all three made it")
	require.NoError(t, r2.agree(opAllGather, b))
	require.NoError(t, r1.agree(opAllGather, b))
	assert.Empty(t, g.calls)

	for name, bad := range map[string]func(r *ncclRank) error{
		"size":  func(r *ncclRank) error { return r.agree(opAllReduce, b) },
		"dtype": func(r *ncclRank) error { return r.agree(opAllReduce, d) },
		"op":    func(r *ncclRank) error { return r.agree(opAllGather, a) },
	} {
		t.Run(name, func(t *testing.T) {
			g := fakeNCCLGroup(2, cpu)
			require.NoError(t, g.ranks[0].agree(opAllReduce, a))
			err := bad(g.ranks[1])
			require.ErrorIs(t, err, ErrMismatch)
			assert.Contains(t, err.Error(), "call 1: rank 0 called AllReduceSum with 4 float32 elements, rank 1")
		})
	}
}

// Abort fails the group with the caller's error (the first abort wins);
// Rank out of range panics.
func TestNCCLAbort(t *testing.T) {
	g := fakeNCCLGroup(2, tensor.CPU())
	require.NoError(t, g.Err())
	cause := errors.New("rank 1 ran out of memory")
	g.Rank(1).Abort(cause)
	g.Rank(0).Abort(errors.New("later"))
	g.Rank(0).Abort(nil)
	require.ErrorIs(t, g.Err(), ErrAborted)
	require.ErrorIs(t, g.Err(), cause)
	assert.NotContains(t, g.Err().Error(), "later")
	assert.Equal(t, 2, g.Size())
	assert.Equal(t, 2, g.Rank(1).Size())
	assert.Equal(t, 1, g.Rank(1).Rank())
	assert.Panics(t, func() { g.Rank(2) })
}

// DataParallel over an NCCL rank (an AsyncCollective) starts its buckets
// through StartAllReduceSum from the gradient hooks; a failure there
// (here: CPU tensors, which NCCL cannot reduce) does not stop backward,
// fails the group at once and is SyncGradients' error.
func TestNCCLOverlapStartFails(t *testing.T) {
	cpu := tensor.CPU()
	g := fakeNCCLGroup(1, cpu)
	v, err := tensor.NewKept(cpu, tensor.Float32, memory.RoleParameter, 4)
	require.NoError(t, err)
	v.Fill(1)
	p := &nn.Parameter{Var: autograd.Param(v, "w"), Name: "w"}
	defer nn.Release([]*nn.Parameter{p})
	d, err := New(g.Rank(0), []*nn.Parameter{p}, Options{})
	require.NoError(t, err)
	defer d.Release()
	c := tensor.NewCtx()
	c.WithScope(func() {
		x := autograd.Const(c.Full(cpu, tensor.Float32, 2, 4))
		require.NoError(t, autograd.Sum(autograd.Mul(x, p.Var), false).Backward(), "backward goes on")
	})
	require.ErrorIs(t, g.Err(), ErrAborted, "the group failed in the hook")
	err = d.SyncGradients()
	require.ErrorIs(t, err, tensor.ErrDevice)
	assert.Contains(t, err.Error(), "tensor.CUDAPointer")
	p.ZeroGrad()
}
