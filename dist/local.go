package dist

import (
	"fmt"
	"sync"

	"github.com/strata-ml/strata/tensor"
)

// NewLocalGroup returns the n ranks of an in-process group: a Collective
// for each of n goroutines (one per rank) of this process, whose tensors
// may be on any device. It is what the tests use, and what trains
// data-parallel on several CPU cores without NCCL. It panics when n < 1.
//
// Each call is a barrier: every rank copies its tensor to the host and
// waits; the last to arrive checks that all made the same call (the same
// operation, dtype and number of elements) and computes the result on the
// host, summing in rank order (rank 0 + rank 1 + ...) in float64 and
// rounding once to the tensor's dtype, so every rank gets bit-identical
// results, the same ones on every run; then each rank writes its result
// back into its tensor. Supported dtypes: float32 and float64.
//
// A rank is an AsyncCollective: StartAllReduceSum runs the call on a
// goroutine, after the calls the rank started before it, and the rank's
// other calls wait for those started, so a rank's calls are made in the
// order it made them, as NCCL's are queued (DataParallel's buckets, of
// one DataParallel or of several sharing the rank).
//
// Failures never leave a rank waiting: a call that finds the ranks
// disagreeing returns an error wrapping ErrMismatch on every rank; a
// rank whose own call fails (a tensor that is not contiguous or not
// float32/float64, an op panic while copying) returns that error and
// aborts the group; Abort fails the group with the caller's error. Every
// call waiting, and every later call, then returns an error wrapping
// ErrAborted and the cause.
func NewLocalGroup(n int) []Collective {
	if n < 1 {
		panic(fmt.Sprintf("dist: NewLocalGroup(%d): want n >= 1", n))
	}
	g := &localGroup{n: n}
	g.cond = sync.NewCond(&g.mu)
	cs := make([]Collective, n)
	for r := range n {
		cs[r] = &localRank{g: g, rank: r, ctx: tensor.NewCtx()}
	}
	return cs
}

var _ AsyncCollective = (*localRank)(nil)

// localGroup is the state the ranks of a local group share.
type localGroup struct {
	n      int
	mu     sync.Mutex
	cond   *sync.Cond
	failed error  // set once; every call after it returns it
	round  *round // the call being gathered, nil between calls
}

// call is what one rank brought to a round.
type call struct {
	op    op
	dtype tensor.DType
	numel int
	data  []float64
}

// round is one collective call of the whole group.
type round struct {
	in      []*call
	arrived int
	done    bool
	err     error
	out     []float64 // the result every rank reads its part of
}

// localRank is one rank's handle; ctx holds its upload temporaries.
type localRank struct {
	g    *localGroup
	rank int
	ctx  *tensor.Ctx
	// tail is closed when the last all-reduce StartAllReduceSum started
	// is done (nil before the first): each started call waits for the
	// one before it, and the rank's other calls wait for it, so that the
	// rank's calls run in the order it made them (several DataParallels
	// may share the rank). Used by the rank's goroutine only.
	tail chan struct{}
}

func (r *localRank) Rank() int { return r.rank }
func (r *localRank) Size() int { return r.g.n }

func (r *localRank) AllReduceSum(t *tensor.Tensor) error     { return r.after(opAllReduce, t) }
func (r *localRank) ReduceScatterSum(t *tensor.Tensor) error { return r.after(opReduceScatter, t) }
func (r *localRank) AllGather(t *tensor.Tensor) error        { return r.after(opAllGather, t) }

// StartAllReduceSum (AsyncCollective) runs AllReduceSum(t) on a
// goroutine of its own, after the calls the rank started before it.
func (r *localRank) StartAllReduceSum(t *tensor.Tensor) (wait func() error, err error) {
	prev, done := r.tail, make(chan struct{})
	r.tail = done
	var cerr error
	go func() {
		defer close(done)
		if prev != nil {
			<-prev
		}
		cerr = r.do(opAllReduce, t)
	}()
	return func() error { <-done; return cerr }, nil
}

// after runs a call once the calls the rank started are done.
func (r *localRank) after(o op, t *tensor.Tensor) error {
	if r.tail != nil {
		<-r.tail
	}
	return r.do(o, t)
}

func (r *localRank) Abort(err error) {
	if err == nil {
		err = fmt.Errorf("dist: Abort with a nil error")
	}
	r.g.fail(fmt.Errorf("%w: rank %d: %w", ErrAborted, r.rank, err))
}

// fail sets the group's error (the first one wins) and wakes every rank.
func (g *localGroup) fail(err error) {
	g.mu.Lock()
	if g.failed == nil {
		g.failed = err
	}
	g.cond.Broadcast()
	g.mu.Unlock()
}

// do runs one collective call of this rank.
func (r *localRank) do(o op, t *tensor.Tensor) error {
	c, err := r.read(o, t)
	if err != nil {
		r.g.fail(fmt.Errorf("%w: rank %d: %w", ErrAborted, r.rank, err))
		return err
	}
	g := r.g
	g.mu.Lock()
	if g.failed != nil {
		err := g.failed
		g.mu.Unlock()
		return err
	}
	rd := g.round
	if rd == nil {
		rd = &round{in: make([]*call, g.n)}
		g.round = rd
	}
	if rd.in[r.rank] != nil { // a second goroutine on the same rank
		g.mu.Unlock()
		err := fmt.Errorf("dist: %v: rank %d called twice in one round: %w", o, r.rank, tensor.ErrArgument)
		g.fail(fmt.Errorf("%w: rank %d: %w", ErrAborted, r.rank, err))
		return err
	}
	rd.in[r.rank] = c
	rd.arrived++
	if rd.arrived == g.n {
		rd.compute()
		rd.done = true
		g.round = nil
		if rd.err != nil && g.failed == nil {
			g.failed = fmt.Errorf("%w: %w", ErrAborted, rd.err)
		}
		g.cond.Broadcast()
	}
	for !rd.done && g.failed == nil {
		g.cond.Wait()
	}
	if !rd.done {
		err := g.failed
		g.mu.Unlock()
		return err
	}
	g.mu.Unlock()
	if rd.err != nil {
		return rd.err
	}
	if err := r.write(o, t, rd.out); err != nil {
		r.g.fail(fmt.Errorf("%w: rank %d: %w", ErrAborted, r.rank, err))
		return err
	}
	return nil
}

// read checks t and copies it to the host.
func (r *localRank) read(o op, t *tensor.Tensor) (*call, error) {
	if t == nil || t.Released() {
		return nil, fmt.Errorf("dist: %v: rank %d: nil or released tensor: %w", o, r.rank, tensor.ErrArgument)
	}
	if dt := t.DType(); dt != tensor.Float32 && dt != tensor.Float64 {
		return nil, fmt.Errorf("dist: %v: rank %d: dtype %v: want float32 or float64: %w", o, r.rank, dt, tensor.ErrDType)
	}
	if !t.IsContiguous() {
		return nil, fmt.Errorf("dist: %v: rank %d: tensor %v is not contiguous: %w", o, r.rank, t.Shape(), tensor.ErrArgument)
	}
	c := &call{op: o, dtype: t.DType(), numel: t.Numel()}
	if err := tensor.Try(func() { c.data = t.Float64s() }); err != nil {
		return nil, err
	}
	return c, nil
}

// compute checks that the ranks agree and computes the round's result
// (called by the last rank to arrive, holding the lock).
func (rd *round) compute() {
	n := len(rd.in)
	c0 := rd.in[0]
	for r, c := range rd.in {
		if c.op != c0.op || c.dtype != c0.dtype || c.numel != c0.numel {
			rd.err = fmt.Errorf("dist: rank 0 called %v with %d %v elements, rank %d %v with %d %v elements: %w",
				c0.op, c0.numel, c0.dtype, r, c.op, c.numel, c.dtype, ErrMismatch)
			return
		}
	}
	if c0.op != opAllReduce && c0.numel%n != 0 {
		rd.err = fmt.Errorf("dist: %v: %d elements are not divisible by the %d ranks: %w", c0.op, c0.numel, n, ErrMismatch)
		return
	}
	out := make([]float64, c0.numel)
	switch c0.op {
	case opAllReduce, opReduceScatter:
		for _, c := range rd.in { // in rank order: the same bits on every rank
			for i, v := range c.data {
				out[i] += v
			}
		}
	case opAllGather:
		k := c0.numel / n
		for r, c := range rd.in {
			copy(out[r*k:(r+1)*k], c.data[r*k:(r+1)*k])
		}
	}
	rd.out = out
}

// write copies this rank's part of the result into t: all of it, or
// chunk Rank for ReduceScatterSum.
func (r *localRank) write(o op, t *tensor.Tensor, out []float64) error {
	n := t.Numel()
	start, length := 0, n
	if o == opReduceScatter {
		length = n / r.g.n
		start = r.rank * length
		out = out[start : start+length]
	}
	if length == 0 {
		return nil
	}
	return tensor.Try(func() {
		r.ctx.WithScope(func() {
			src := r.ctx.FromFloat64s(t.Device(), out, length) // rounded once to t's dtype by CopyFrom
			flat := t.Reshape(n)
			dst := flat.Narrow(0, start, length)
			defer func() { dst.Release(); flat.Release() }()
			dst.CopyFrom(src)
		})
	})
}
