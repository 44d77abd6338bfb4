package tensor

import (
	"fmt"
	"slices"

	"github.com/strata-ml/strata/memory"
)

// Tensor is an n-dimensional strided view of a device storage. Several
// tensors (views) may share one storage; each holds one reference to it.
// A tensor is released exactly once: explicitly with Release, by the
// Scope that owns it, or (as a leak) by the garbage collector.
type Tensor struct {
	ref      *ref
	shape    []int
	strides  []int // in elements
	offset   int   // in elements
	dtype    DType
	dev      Device
	ctx      *Ctx   // the context it belongs to (ctx.go); nil once kept
	orphan   bool   // made in Background by an op on kept tensors, owned by no scope
	guarded  bool   // the leak safety net is attached (storage.go's guard)
	scope    *Scope // the scope that owns it, if any
	scopeIdx int
}

// Shape returns a copy of the dimensions.
func (t *Tensor) Shape() []int { return slices.Clone(t.shape) }

// Strides returns a copy of the strides, in elements.
func (t *Tensor) Strides() []int { return slices.Clone(t.strides) }

// Offset is the view's first element within its storage.
func (t *Tensor) Offset() int { return t.offset }

// Rank is the number of dimensions.
func (t *Tensor) Rank() int { return len(t.shape) }

// Dim returns dimension i; negative i counts from the end.
func (t *Tensor) Dim(i int) int { return t.shape[t.axis("Dim", i)] }

// Numel is the number of elements.
func (t *Tensor) Numel() int { return numel(t.shape) }

// DType is the element type.
func (t *Tensor) DType() DType { return t.dtype }

// Device is where the tensor lives.
func (t *Tensor) Device() Device { return t.dev }

// Role is the memory role of the tensor's storage.
func (t *Tensor) Role() memory.Role { return t.ref.st.alloc.Role() }

// Tier is the memory tier of the tensor's storage.
func (t *Tensor) Tier() memory.Tier { return t.ref.st.alloc.Tier() }

// SetLabel names t's storage in the memory manager's placement plans and
// snapshots (a parameter's name); views share the label of their storage.
func (t *Tensor) SetLabel(name string) { t.ref.st.alloc.SetLabel(name) }

// Allocation is t's storage in the memory manager, shared with its views:
// for placement (memory.Scheduler.Track, memory.Manager.Migrate) and
// statistics. Do not free it; Release the tensor.
func (t *Tensor) Allocation() *memory.Allocation { return t.ref.st.alloc }

// Bytes is the size of the tensor's elements in bytes (not of its storage).
func (t *Tensor) Bytes() int64 { return int64(t.Numel()) * int64(t.dtype.Size()) }

// IsContiguous reports whether the elements lie densely in row-major order.
// A tensor without elements is contiguous whatever its strides, as in
// PyTorch: a zero-length Narrow of a matrix's columns, say, which in-place
// ops (Fill, CopyFrom) refused as strided.
func (t *Tensor) IsContiguous() bool { return t.Numel() == 0 || isContiguous(t.shape, t.strides) }

// Released reports whether Release was called (or the owning scope closed).
// It may be asked from another goroutine than the one that releases t (a
// checkpoint.Offload shared by goroutines asks it of every context's
// regions).
func (t *Tensor) Released() bool { return t.ref.released.Load() }

// SharesStorage reports whether t and u are views of the same storage.
func (t *Tensor) SharesStorage(u *Tensor) bool { return t.ref.st == u.ref.st }

// Views is the number of live tensors, t among them, that view t's
// storage (0 once t is released and no other does).
func (t *Tensor) Views() int { return int(t.ref.st.refs.Load()) }

// Sole reports whether t is the only live tensor on its storage and a
// contiguous view of all of it: what a caller that owns t may keep as it
// is instead of copying it (autograd keeps a leaf's first gradient so).
func (t *Tensor) Sole() bool {
	return !t.ref.released.Load() && t.ref.st.refs.Load() == 1 && t.offset == 0 && t.IsContiguous() && t.Bytes() == t.ref.st.nbytes
}

// Release drops the tensor's reference to its storage; the memory goes
// back to the pool when no view refers to it. Releasing twice is a no-op,
// also from goroutines releasing t at once: exactly one drops the
// reference. Using a released tensor panics with ErrReleased.
func (t *Tensor) Release() {
	if t == nil || !t.ref.released.CompareAndSwap(false, true) {
		return
	}
	if t.scope != nil {
		untrack(t)
	}
	t.ref.st.release()
}

// live panics when t was released; ops call it on every input.
func (t *Tensor) live(op string) {
	if t == nil {
		fail(op, ErrArgument, "nil tensor")
	}
	if t.ref.released.Load() {
		if t.ref.byScope {
			fail(op, ErrReleased, "tensor %v %v (made by %s) was released when the scope that owned it closed "+
				"(Keep a tensor to use it after its scope; if two goroutines share a Ctx, Background say, one's scope "+
				"releases the other's tensors: give each goroutine its own Ctx, tensor.NewCtx)", t.dtype, t.shape, t.ref.op)
		}
		fail(op, ErrReleased, "tensor %v %v (made by %s) was released", t.dtype, t.shape, t.ref.op)
	}
}

func (t *Tensor) String() string {
	if t.ref.released.Load() {
		return fmt.Sprintf("Tensor(%v %v, released)", t.dtype, t.shape)
	}
	return format(t)
}

// newTensor allocates a contiguous tensor placed in c (see place).
func newTensor(op string, c *Ctx, dev Device, dt DType, role memory.Role, shape []int) (*Tensor, error) {
	if dev == nil {
		return nil, &OpError{Op: op, Msg: "nil device", Err: ErrDevice}
	}
	if dt >= numDTypes {
		return nil, &OpError{Op: op, Msg: fmt.Sprintf("unknown dtype %v", dt), Err: ErrDType}
	}
	n, problem := elements(shape, dt)
	if problem != "" {
		return nil, &OpError{Op: op, Msg: problem, Err: ErrShape}
	}
	// elements lets a view reach 2^62 bytes; an allocation must stay below
	// the memory manager's largest request (1<<62 - 1, less a CUDA guard's
	// bytes), which refuses it with memory.ErrInvalidArgument otherwise.
	if int64(n)*int64(dt.Size()) > maxStorageBytes {
		return nil, &OpError{Op: op, Msg: fmt.Sprintf("shape %v of %v is more bytes than memory can allocate", shape, dt), Err: ErrShape}
	}
	st, err := newStorage(op, dev, int64(n)*int64(dt.Size()), role)
	if err != nil {
		return nil, &OpError{Op: op, Msg: fmt.Sprintf("allocating %v %v on %v", dt, shape, dev), Err: err}
	}
	owner := c
	if owner == nil {
		owner = background
	}
	st.owner = owner
	owner.live.Add(st.nbytes)
	sh := slices.Clone(shape)
	t := &Tensor{ref: &ref{st: st, op: op}, shape: sh, strides: contiguousStrides(sh), dtype: dt, dev: dev}
	noteOrigin(t)
	if err := place(op, t, c); err != nil {
		return nil, err
	}
	return t, nil
}

// elements is the number of elements of shape, or what is wrong with it
// (a negative dimension; more elements, or bytes of dtype dt, than
// memory can address) when the count would not fit: the check of every
// new tensor, and of the shapes the creation functions compare with
// their data before they make one.
func elements(shape []int, dt DType) (n int, problem string) {
	// The nonzero dimensions multiply to at most 2^62 whatever their
	// order, also beside a 0: a contiguous tensor's strides are products
	// of them ([0, 2^62, 2^62] would wrap its first stride around, and
	// [2^62, 2^62, 0] was refused where [0, 2^62, 2^62] was not).
	n, zero, over := 1, false, false
	for _, d := range shape {
		switch {
		case d < 0:
			return 0, fmt.Sprintf("negative dimension in shape %v", shape)
		case d == 0:
			zero = true
		case n > (1<<62)/d:
			over = true
		default:
			n *= d
		}
	}
	switch {
	case over && zero:
		return 0, fmt.Sprintf("shape %v: its nonzero dimensions multiply to more than 2^62 (its strides would overflow int)", shape)
	case over:
		return 0, fmt.Sprintf("shape %v has too many elements", shape)
	case zero:
		n = 0
	}
	if n > (1<<62)/max(dt.Size(), 1) { // the bytes must not overflow either
		return 0, fmt.Sprintf("shape %v of %v is more bytes than memory can address", shape, dt)
	}
	return n, ""
}

// maxStorageBytes is the largest storage newTensor asks for: below
// memory's largest request (1<<62 - 1) by more than guardBytes.
const maxStorageBytes = 1<<62 - 1<<20

// mustNew is newTensor for ops, with c's role (Background's for c ==
// nil): it panics with the *OpError.
func mustNew(op string, c *Ctx, dev Device, dt DType, shape []int) *Tensor {
	rc := c
	if rc == nil {
		rc = background
	}
	t, err := newTensor(op, c, dev, dt, rc.Role(), shape)
	if err != nil {
		panic(err)
	}
	return t
}

// view makes a new tensor sharing t's storage, in t's context.
func (t *Tensor) view(op string, shape, strides []int, offset int) *Tensor {
	t.ref.st.retain()
	v := &Tensor{ref: &ref{st: t.ref.st, op: op}, shape: shape, strides: strides, offset: offset, dtype: t.dtype, dev: t.dev}
	noteOrigin(v)
	if err := place(op, v, ctxOf(op, t)); err != nil {
		panic(err)
	}
	return v
}

// axis normalises a possibly negative axis, panicking when out of range.
func (t *Tensor) axis(op string, a int) int {
	r := len(t.shape)
	n := a
	if n < 0 {
		n += r
	}
	if n < 0 || n >= r {
		fail(op, ErrShape, "axis %d out of range for shape %v", a, t.shape)
	}
	return n
}
