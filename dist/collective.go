package dist

import (
	"errors"
	"fmt"

	"github.com/strata-ml/strata/tensor"
)

// Collective is one rank's handle on a group of Size ranks that run the
// same program, each on its own goroutine, process or GPU, and meet in
// collective calls. Every rank must make the same calls in the same order
// with tensors of the same dtype and number of elements; a call returns
// when every rank has made it (or the group has failed).
//
// The calls work in place on one contiguous tensor, the shape of NCCL's
// in-place collectives (sendbuff == recvbuff), so an NCCL-backed
// implementation passes the tensor's device pointer and element count to
// one ncclAllReduce, ncclReduceScatter or ncclAllGather on its stream:
// one call per gradient bucket. Only the number of elements and the dtype
// matter, not the shape. Implementations support float32 and float64 at
// least; a dtype they do not support is an error wrapping
// tensor.ErrDType.
//
// A rank's Collective is used by one goroutine at a time (as an NCCL
// communicator is used from one stream). Errors: a call that finds
// different sizes or dtypes on two ranks, a tensor that is not
// contiguous, or a rank that called Abort fails the group: every rank's
// pending and later calls return an error (wrapping ErrMismatch or
// ErrAborted), none of them hangs. A group that failed stays failed.
type Collective interface {
	// Rank is this rank's index, 0 <= Rank < Size.
	Rank() int
	// Size is the number of ranks.
	Size() int
	// AllReduceSum replaces t, on every rank, by the element-wise sum of
	// every rank's t (ncclAllReduce with ncclSum, in place).
	AllReduceSum(t *tensor.Tensor) error
	// ReduceScatterSum sums t over the ranks and leaves chunk Rank of the
	// sum in chunk Rank of this rank's t: t's n elements, n divisible by
	// Size, are Size chunks of n/Size, chunk r being elements
	// [r·n/Size, (r+1)·n/Size). The other chunks of t are unspecified
	// afterwards (ncclReduceScatter in place: recvbuff = sendbuff +
	// Rank·n/Size).
	ReduceScatterSum(t *tensor.Tensor) error
	// AllGather fills every chunk r of t (chunks as in ReduceScatterSum)
	// with chunk r of rank r's t, on every rank; this rank's input is its
	// own chunk Rank, the rest of t is overwritten (ncclAllGather in
	// place: sendbuff = recvbuff + Rank·n/Size).
	AllGather(t *tensor.Tensor) error
	// Abort fails the group with err (ncclCommAbort): the calls other
	// ranks are waiting in, and every later call on any rank, return an
	// error wrapping ErrAborted and err. A rank whose step fails before
	// or between collective calls must call it, or the other ranks wait
	// for it forever (NCCL's behaviour too). Aborting a failed group
	// does nothing.
	Abort(err error)
}

var (
	// ErrMismatch is wrapped by the errors of a collective call that the
	// ranks made with different sizes, dtypes or calls.
	ErrMismatch = errors.New("dist: ranks disagree")
	// ErrAborted is wrapped by the errors of every call after a rank
	// aborted the group (or a call failed it).
	ErrAborted = errors.New("dist: group aborted")
)

// opName names the collective operations in errors.
type op int

const (
	opAllReduce op = iota
	opReduceScatter
	opAllGather
)

func (o op) String() string {
	switch o {
	case opAllReduce:
		return "AllReduceSum"
	case opReduceScatter:
		return "ReduceScatterSum"
	case opAllGather:
		return "AllGather"
	}
	return fmt.Sprintf("op(%d)", int(o))
}
