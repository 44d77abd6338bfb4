package nccl

import (
	"testing"

	"github.com/strata-ml/strata/cuda"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A communicator over a library with no functions: any call into C would
// panic (purego refuses address 0), so every error here comes from the
// checks made before NCCL is called.
func checkedComm() *Comm { return &Comm{lib: &lib{}, h: 0x1000, rank: 1, count: 4, device: 0} }

func TestArgumentChecks(t *testing.T) {
	c := checkedComm()
	const p, q = cuda.DevicePtr(0x7f0000), cuda.DevicePtr(0x7f1000)
	cases := []struct {
		name string
		err  error
		want string
	}{
		{"negative count", c.AllReduce(p, q, -1, Float32, Sum, nil), "nccl: AllReduce: negative count -1"},
		{"unknown type", c.AllReduce(p, q, 8, DataType(42), Sum, nil), "unknown data type DataType(42)"},
		{"unknown op", c.AllReduce(p, q, 8, Float32, RedOp(9), nil), "unknown reduction RedOp(9)"},
		{"null send", c.AllReduce(0, q, 8, Float32, Sum, nil), "null buffer (send 0x0, recv 0x7f1000)"},
		{"null recv", c.AllReduce(p, 0, 8, BFloat16, Avg, nil), "null buffer"},
		{"reduce-scatter count", c.ReduceScatter(p, q, -4, Float16, Max, nil), "nccl: ReduceScatter: negative count -4"},
		{"reduce-scatter op", c.ReduceScatter(p, q, 4, Float16, RedOp(-1), nil), "unknown reduction RedOp(-1)"},
		{"reduce-scatter null", c.ReduceScatter(p, 0, 4, Float16, Sum, nil), "null buffer"},
		{"all-gather count", c.AllGather(p, q, -2, Int32, nil), "nccl: AllGather: negative count -2"},
		{"all-gather null", c.AllGather(0, q, 2, Int32, nil), "null buffer"},
		{"broadcast root high", c.Broadcast(p, q, 2, Float64, 4, nil), "nccl: Broadcast: root 4 out of range [0, 4)"},
		{"broadcast root negative", c.Broadcast(p, q, 2, Float64, -1, nil), "root -1 out of range"},
		{"broadcast null recv", c.Broadcast(p, 0, 2, Float64, 0, nil), "null buffer"},
		{"broadcast null send on root", c.Broadcast(0, q, 2, Float64, 1, nil), "null buffer (send 0x0, recv 0x7f1000) on rank 1, root 1"},
	}
	for _, k := range cases {
		require.ErrorIs(t, k.err, ErrInvalidArgument, k.name)
		assert.Contains(t, k.err.Error(), k.want, k.name)
	}

	var nilComm *Comm
	for _, err := range []error{
		nilComm.AllReduce(p, q, 1, Float32, Sum, nil),
		nilComm.ReduceScatter(p, q, 1, Float32, Sum, nil),
		nilComm.AllGather(p, q, 1, Float32, nil),
		nilComm.Broadcast(p, q, 1, Float32, 0, nil),
		nilComm.Destroy(),
		nilComm.AsyncError(),
	} {
		require.ErrorIs(t, err, ErrInvalidArgument)
		assert.Contains(t, err.Error(), "nil communicator")
	}
	assert.Equal(t, 0, nilComm.Rank())
	assert.Equal(t, 0, nilComm.Count())
	assert.Equal(t, -1, nilComm.Device())
	assert.Equal(t, "nil communicator", nilComm.String())

	c.destroyed = true
	err := c.AllReduce(p, q, 1, Float32, Sum, nil)
	require.ErrorIs(t, err, ErrInvalidArgument)
	assert.Contains(t, err.Error(), "rank 1 of 4 (cuda:0) was destroyed")
	assert.NoError(t, c.Destroy(), "destroying twice is a no-op")
}

// CommInitRank and CommInitAll check their arguments before loading NCCL.
func TestInitArgumentChecks(t *testing.T) {
	id := UniqueID{1, 2, 3}
	cases := []struct {
		err  error
		want string
	}{
		{func() error { _, err := CommInitRank(0, id, 0); return err }(), "nccl: CommInitRank: 0 ranks: a communicator has at least 1"},
		{func() error { _, err := CommInitRank(2, id, 2); return err }(), "rank 2 out of range [0, 2)"},
		{func() error { _, err := CommInitRank(2, id, -1); return err }(), "rank -1 out of range [0, 2)"},
		{func() error { _, err := CommInitRank(2, UniqueID{}, 0); return err }(), "zero unique id"},
		{func() error { _, err := CommInitAll(nil); return err }(), "nccl: CommInitAll: no devices"},
		{func() error { _, err := CommInitAll([]int{0, -1}); return err }(), "negative device ordinal -1"},
		{func() error { _, err := CommInitAll([]int{1, 0, 1}); return err }(), "device 1 listed twice"},
	}
	for _, k := range cases {
		require.ErrorIs(t, k.err, ErrInvalidArgument, k.want)
		assert.NotErrorIs(t, k.err, ErrNotAvailable, k.want)
		assert.Contains(t, k.err.Error(), k.want)
	}
}
