package dist

import (
	"errors"
	"fmt"
	"sync"

	"github.com/strata-ml/strata/cuda"
	"github.com/strata-ml/strata/nccl"
	"github.com/strata-ml/strata/tensor"
)

// NCCLGroup is a group of ranks, one per GPU, driven by one process with
// one goroutine per rank, whose Collectives are NCCL's: each rank's calls
// queue ncclAllReduce, ncclReduceScatter or ncclAllGather, in place, on
// its device's stream (tensor.CUDAStream), on the tensor's device address
// (tensor.CUDAPointer). See the package documentation, "NCCL", for the
// stream and the layout.
type NCCLGroup struct {
	ranks []*ncclRank

	mu     sync.Mutex
	failed error            // set once; every later call returns it
	calls  map[int]*ncclSig // call k's signature, until every rank made it
}

// ncclSig is what the first rank to make call k brought, and how many
// ranks made it so far.
type ncclSig struct {
	rank  int
	op    op
	dtype tensor.DType
	numel int
	seen  int
}

// ncclRank is one rank's Collective.
type ncclRank struct {
	g      *NCCLGroup
	rank   int
	dev    tensor.Device
	comm   *nccl.Comm
	stream *cuda.Stream
	seq    int         // this rank's calls so far (used by its goroutine only)
	cs     *commStream // the communication stream of StartAllReduceSum, made on first use (nccl_overlap.go)
}

// NewNCCLGroup makes one NCCL communicator per device (nccl.CommInitAll:
// devs[i] becomes rank i) and returns the group; Rank(i) is the
// Collective the goroutine driving devs[i] uses. Errors: no devices, a
// device that is not CUDA or is listed twice (wrapping tensor.ErrDevice
// and tensor.ErrArgument), NCCL missing (nccl's error, wrapping
// nccl.ErrNotAvailable, which names every file tried), or NCCL's own.
func NewNCCLGroup(devs []tensor.Device) (*NCCLGroup, error) {
	if len(devs) == 0 {
		return nil, fmt.Errorf("dist: NewNCCLGroup: no devices: %w", tensor.ErrArgument)
	}
	ords := make([]int, len(devs))
	streams := make([]*cuda.Stream, len(devs))
	seen := map[int]int{}
	for i, d := range devs {
		s, err := tensor.CUDAStream(d)
		if err != nil {
			return nil, fmt.Errorf("dist: NewNCCLGroup: rank %d: %v is not a CUDA device (NCCL reduces on GPUs; NewLocalGroup works on any device): %w", i, d, tensor.ErrDevice)
		}
		o := int(s.Context().Device())
		if j, ok := seen[o]; ok {
			return nil, fmt.Errorf("dist: NewNCCLGroup: ranks %d and %d are both %v (one GPU a rank): %w", j, i, d, tensor.ErrArgument)
		}
		seen[o] = i
		ords[i], streams[i] = o, s
	}
	if err := nccl.Init(); err != nil {
		return nil, fmt.Errorf("dist: NewNCCLGroup: %w", err)
	}
	comms, err := nccl.CommInitAll(ords)
	if err != nil {
		return nil, fmt.Errorf("dist: NewNCCLGroup on %v: %w", devs, err)
	}
	g := &NCCLGroup{calls: map[int]*ncclSig{}}
	for i, c := range comms {
		g.ranks = append(g.ranks, &ncclRank{g: g, rank: i, dev: devs[i], comm: c, stream: streams[i]})
	}
	return g, nil
}

// Size is the number of ranks.
func (g *NCCLGroup) Size() int { return len(g.ranks) }

// Rank is rank i's Collective. It panics when i is out of range.
func (g *NCCLGroup) Rank(i int) Collective {
	if i < 0 || i >= len(g.ranks) {
		panic(fmt.Sprintf("dist: NCCLGroup.Rank(%d) of %d ranks", i, len(g.ranks)))
	}
	return g.ranks[i]
}

// Err is the error that failed the group (an Abort, a rank's bad call or
// a mismatch), or nil.
func (g *NCCLGroup) Err() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.failed
}

// Close destroys the communicators (those an abort freed already are
// skipped) and the ranks' communication streams. Call it once every rank
// is done; it waits for their queued collectives.
func (g *NCCLGroup) Close() error {
	var errs []error
	for _, r := range g.ranks {
		if err := r.comm.Destroy(); err != nil {
			errs = append(errs, fmt.Errorf("dist: closing rank %d: %w", r.rank, err))
		}
		if err := r.closeComms(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// fail sets the group's error (the first wins) and aborts every rank's
// communicator (ncclCommAbort), which stops the collectives they have
// queued: a rank waiting on its stream for a peer that will never call
// returns. An abort's own failure is joined to the group's error.
func (g *NCCLGroup) fail(err error) {
	g.mu.Lock()
	first := g.failed == nil
	if first {
		g.failed = err
	}
	g.mu.Unlock()
	if !first {
		return
	}
	var errs []error
	for _, r := range g.ranks {
		if r.comm == nil {
			continue
		}
		if aerr := r.comm.Abort(); aerr != nil {
			errs = append(errs, aerr)
		}
	}
	if len(errs) > 0 {
		g.mu.Lock()
		g.failed = errors.Join(append([]error{g.failed}, errs...)...)
		g.mu.Unlock()
	}
}

func (r *ncclRank) Rank() int { return r.rank }
func (r *ncclRank) Size() int { return len(r.g.ranks) }

func (r *ncclRank) AllReduceSum(t *tensor.Tensor) error     { return r.do(opAllReduce, t) }
func (r *ncclRank) ReduceScatterSum(t *tensor.Tensor) error { return r.do(opReduceScatter, t) }
func (r *ncclRank) AllGather(t *tensor.Tensor) error        { return r.do(opAllGather, t) }

// Abort fails the group with err and aborts every rank's communicator.
func (r *ncclRank) Abort(err error) {
	if err == nil {
		err = fmt.Errorf("dist: Abort with a nil error")
	}
	r.g.fail(fmt.Errorf("%w: rank %d: %w", ErrAborted, r.rank, err))
}

// ncclTypes maps the tensor dtypes NCCL reduces to its own.
var ncclTypes = map[tensor.DType]nccl.DataType{
	tensor.Float32:  nccl.Float32,
	tensor.Float64:  nccl.Float64,
	tensor.Float16:  nccl.Float16,
	tensor.BFloat16: nccl.BFloat16,
	tensor.Int32:    nccl.Int32,
}

// check validates t for call o on this rank, before anything is queued:
// it returns NCCL's element type, the tensor's address, and the number
// of elements per rank (all of them for an all-reduce).
func (r *ncclRank) check(o op, t *tensor.Tensor) (nccl.DataType, cuda.DevicePtr, int, error) {
	if t == nil || t.Released() {
		return 0, 0, 0, fmt.Errorf("dist: %v: rank %d: nil or released tensor: %w", o, r.rank, tensor.ErrArgument)
	}
	dt, ok := ncclTypes[t.DType()]
	if !ok {
		return 0, 0, 0, fmt.Errorf("dist: %v: rank %d: dtype %v: NCCL's collectives here take float32, float64, float16, bfloat16 or int32: %w", o, r.rank, t.DType(), tensor.ErrDType)
	}
	if t.Device() != r.dev {
		return 0, 0, 0, fmt.Errorf("dist: %v: rank %d: tensor %v %v is on %v, the rank's GPU is %v: %w", o, r.rank, t.DType(), t.Shape(), t.Device(), r.dev, tensor.ErrDevice)
	}
	n, size := t.Numel(), len(r.g.ranks)
	if o != opAllReduce && n%size != 0 {
		return 0, 0, 0, fmt.Errorf("dist: %v: rank %d: %d elements are not divisible by the %d ranks: %w", o, r.rank, n, size, ErrMismatch)
	}
	p, err := tensor.CUDAPointer(t)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("dist: %v: rank %d: %w", o, r.rank, err)
	}
	t.MarkModified() // the collective writes t's bytes (tensor.Tensor.Version)
	if o != opAllReduce {
		n /= size
	}
	return dt, p, n, nil
}

// agree records this rank's call k and compares it with the first rank's
// to make it: in one process the ranks' calls can be compared, so a rank
// whose call differs (another operation, dtype or size, which NCCL would
// hang or read out of bounds on) fails the group. A rank may run ahead of
// the others; each call's record is dropped once every rank made it.
func (r *ncclRank) agree(o op, t *tensor.Tensor) error {
	g := r.g
	k := r.seq
	r.seq++
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.failed != nil {
		return g.failed
	}
	s := g.calls[k]
	if s == nil {
		s = &ncclSig{rank: r.rank, op: o, dtype: t.DType(), numel: t.Numel()}
		g.calls[k] = s
	} else if s.op != o || s.dtype != t.DType() || s.numel != t.Numel() {
		return fmt.Errorf("dist: call %d: rank %d called %v with %d %v elements, rank %d %v with %d %v elements: %w",
			k+1, s.rank, s.op, s.numel, s.dtype, r.rank, o, t.Numel(), t.DType(), ErrMismatch)
	}
	if s.seen++; s.seen == len(g.ranks) {
		delete(g.calls, k)
	}
	return nil
}

// do runs one collective call of this rank: the checks, then one NCCL
// call queued on the device's stream. It returns once the call is queued
// (ops on the tensor queued after it run after it); any failure fails
// the group.
func (r *ncclRank) do(o op, t *tensor.Tensor) error {
	dt, p, n, err := r.begin(o, t)
	if err == nil && n > 0 {
		esz := uintptr(t.DType().Size())
		mine := p + cuda.DevicePtr(uintptr(r.rank*n)*esz) // this rank's chunk
		switch o {
		case opAllReduce:
			err = r.comm.AllReduce(p, p, n, dt, nccl.Sum, r.stream)
		case opReduceScatter:
			err = r.comm.ReduceScatter(p, mine, n, dt, nccl.Sum, r.stream)
		case opAllGather:
			err = r.comm.AllGather(mine, p, n, dt, r.stream)
		}
	}
	if err != nil {
		return r.failed(err)
	}
	return nil
}

// begin runs what precedes a call's NCCL work: the tensor's checks, the
// comparison with the other ranks' same call, and NCCL's asynchronous
// error (a peer's failure it found).
func (r *ncclRank) begin(o op, t *tensor.Tensor) (nccl.DataType, cuda.DevicePtr, int, error) {
	dt, p, n, err := r.check(o, t)
	if err == nil {
		err = r.agree(o, t)
	}
	if err == nil {
		err = r.comm.AsyncError()
	}
	return dt, p, n, err
}

// failed is a call's error err as the caller gets it, the group failed
// with it: an error wrapping ErrAborted (the group had failed before) as
// it is; the group's cause when the communicator was aborted under the
// call; else err, after failing the group with it.
func (r *ncclRank) failed(err error) error {
	if errors.Is(err, ErrAborted) {
		return err
	}
	if g := r.g.Err(); g != nil {
		return g
	}
	r.g.fail(fmt.Errorf("%w: rank %d: %w", ErrAborted, r.rank, err))
	return err
}
