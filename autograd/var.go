package autograd

import (
	"fmt"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/tensor"
)

// Var is a value in the computation graph: a tensor, whether gradients
// flow to it, the node that produced it (nil for leaves) and, for leaves
// that require gradients, the accumulated gradient.
type Var struct {
	// Value is the tensor. Backward releases the values of intermediate
	// (non-leaf) vars once nothing needs them any more, unless Retain
	// was called.
	Value *tensor.Tensor
	// Grad is the accumulated gradient of a leaf that requires gradients
	// (or of a retained var). It survives scopes; ZeroGrad releases it.
	Grad *tensor.Tensor

	requiresGrad bool
	retain       bool
	node         *node
	consumed     bool           // node was consumed by a backward pass: not a leaf, though node is nil
	from         []*Var         // the inputs of an op recorded with no node (none required gradients): see Leaves
	pending      *tensor.Tensor // gradient being summed during Backward
	slices       *sliceSpans    // pending assembled from Narrow slices (see narrow.go)
	name         string
	op           string
	hook         *gradHook    // a leaf's gradient-ready hook (gradhook.go), nil without
	halfGrad     tensor.DType // SetGradDType's half dtype; meaningful when hasHalfGrad
	hasHalfGrad  bool
	// regionIn marks an input of RegionGrad's inner pass (a region's
	// detached input, a computed var standing as a leaf) while it runs:
	// its gradient is taken as a computed var's pending one is, in the
	// layout its consumer made it (keepGrad, capture.wants), for the
	// engine to hand on as the plain graph's would.
	regionIn bool
}

// node records how a var was computed: its inputs and the backward
// function that maps the output gradient to input gradients.
type node struct {
	op       string
	inputs   []*Var
	backward BackwardFunc
	saved    []*tensor.Tensor // released after backward runs
	// narrow is set for Narrow: the engine writes the output gradient
	// straight into a slice of the input's pending gradient instead of
	// calling backward (see narrow.go).
	narrow *narrowOf
	// alsoTakes is the set (bit 1<<dtype) of dtypes other than the
	// value's in which backward also takes its output gradient: a half
	// type for ops whose products would cast it there (takesHalfGrad),
	// float32 for a half output whose backward works in float32
	// (LayerNormHalf).
	alsoTakes uint8
	// region is set for RecordRegion's nodes, whose backward runs a
	// backward pass of its own (gradhook.go).
	region bool
	// grad is the Grad pass stepping this region node while its backward
	// runs, nil otherwise (RegionGrad).
	grad *capture
	// hooks is the pass counting hooked leaves (gradhook.go) while a
	// region node's backward runs in a Backward pass, nil otherwise.
	hooks *gradPass
	// seq orders the nodes by when they were recorded (nodeSeq), for
	// Var.Outer.
	seq uint64
	// watch holds what backward reads with the versions it had when the op
	// was recorded, checked before backward runs (version.go); watchBuf
	// keeps a few without an allocation.
	watch    []watched
	watchBuf [4]watched
	// also holds what a region node's recomputation reads besides its
	// inputs and saved tensors (Var.AlsoReads): reported by Var.Reads,
	// checked by the region itself, not by the engine.
	also []Read
	// site is the stack that recorded the node, kept with anomaly
	// detection on (anomaly.go).
	site []uintptr
}

// takes reports whether n's backward takes its output gradient in dt
// besides its value's dtype.
func (n *node) takes(dt tensor.DType) bool { return n.alsoTakes&(1<<dt) != 0 }

// BackwardFunc maps the gradient of an op's output to the gradients of
// its inputs, in order; an entry may be nil when that input needs none
// (see Var.RequiresGrad). The returned tensors belong to the engine; one
// that the op holds (an input's value, its output, a saved tensor) may be
// returned as it is, as PyTorch's Function.backward may return what it
// saved: the engine takes a view of its own, and the tensor stays.
//
// Backward checks what a backward returns before handing any of it on:
// one entry per input, and each gradient it uses (a non-nil entry for an
// input that requires gradients) live, of its input's shape, of a float
// dtype and on its input's device. Anything else fails Backward with an
// *tensor.OpError naming the op: a count other than the inputs' wraps
// tensor.ErrArgument, a released gradient tensor.ErrReleased, another
// shape tensor.ErrShape, an integer dtype tensor.ErrDType, another device
// tensor.ErrDevice. The node is then not stepped: its inputs receive none
// of its gradients.
type BackwardFunc func(g *tensor.Tensor) []*tensor.Tensor

// Param returns a leaf that requires gradients (a trainable parameter).
// The tensor is taken out of scope tracking: it lives until released.
// Only a floating-point tensor can require gradients, as in PyTorch: a
// nil t panics with an *tensor.OpError wrapping tensor.ErrArgument, an
// integer one with one wrapping tensor.ErrDType (use Const for ids).
func Param(t *tensor.Tensor, name string) *Var {
	if t == nil {
		panic(&tensor.OpError{Op: "autograd.Param", Msg: fmt.Sprintf("%q: nil tensor", name), Err: tensor.ErrArgument})
	}
	if !t.DType().IsFloat() {
		panic(&tensor.OpError{Op: "autograd.Param", Err: tensor.ErrDType,
			Msg: fmt.Sprintf("%q has dtype %v: only tensors of a floating-point dtype can require gradients (Const takes any)", name, t.DType())})
	}
	tensor.Keep(t)
	return &Var{Value: t, requiresGrad: true, name: name}
}

// Const returns a leaf without gradient (inputs, targets, frozen weights).
// A nil t panics with an *tensor.OpError wrapping tensor.ErrArgument.
func Const(t *tensor.Tensor) *Var {
	if t == nil {
		panic(&tensor.OpError{Op: "autograd.Const", Msg: "nil tensor", Err: tensor.ErrArgument})
	}
	return &Var{Value: t}
}

// args checks the *Var arguments of op, vs, named in names (separated by
// spaces; a name ending in "?" is an optional argument, which may be nil):
// a nil argument that is not optional, or a Var that holds no value,
// panics with an *tensor.OpError wrapping tensor.ErrArgument, as a nil
// tensor does in the tensor ops.
func args(op, names string, vs ...*Var) {
	for i, v := range vs {
		if v != nil && v.Value != nil {
			continue
		}
		name, rest, _ := strings.Cut(names, " ")
		for range i {
			name, rest, _ = strings.Cut(rest, " ")
		}
		name, optional := strings.CutSuffix(name, "?")
		switch {
		case v == nil && optional:
			continue
		case v == nil:
			panic(&tensor.OpError{Op: "autograd." + op, Msg: fmt.Sprintf("%s is a nil *autograd.Var", name), Err: tensor.ErrArgument})
		default:
			panic(&tensor.OpError{Op: "autograd." + op, Msg: fmt.Sprintf("%s is a Var with no value (make one with Param, Const or an op)", name), Err: tensor.ErrArgument})
		}
	}
}

// RequiresGrad reports whether gradients flow to v.
func (v *Var) RequiresGrad() bool { return v.requiresGrad }

// SetRequiresGrad turns gradient tracking of a leaf on or off (freezing a
// parameter). As for Param, only a leaf of a floating-point dtype can
// require gradients. A non-leaf panics with an *tensor.OpError wrapping
// tensor.ErrArgument, turning it on for an integer leaf with one wrapping
// tensor.ErrDType.
func (v *Var) SetRequiresGrad(b bool) {
	const op = "autograd.Var.SetRequiresGrad"
	if !v.IsLeaf() {
		panic(&tensor.OpError{Op: op, Msg: fmt.Sprintf("non-leaf %s (only a leaf's tracking can be set; Detach makes one)", v), Err: tensor.ErrArgument})
	}
	if b && v.Value != nil && !v.Value.DType().IsFloat() {
		panic(&tensor.OpError{Op: op, Err: tensor.ErrDType,
			Msg: fmt.Sprintf("%s has dtype %v: only tensors of a floating-point dtype can require gradients", v, v.Value.DType())})
	}
	v.requiresGrad = b
}

// IsLeaf reports whether v was not produced by a recorded op; a var whose
// node a Backward consumed is still no leaf, as in PyTorch.
func (v *Var) IsLeaf() bool { return v.node == nil && !v.consumed }

// Retain keeps v's value and its gradient (in Grad) through Backward.
func (v *Var) Retain() *Var { v.retain = true; return v }

// Name is the var's name (parameters) or the op that produced it (v.op,
// set by Record: it outlives the node that Backward consumes).
func (v *Var) Name() string {
	if v.name == "" {
		return v.op
	}
	return v.name
}

// SetName renames v (a parameter, when a container such as
// nn.NewSequential prefixes its layers' names): the name errors, anomaly
// reports and ErrModified give.
func (v *Var) SetName(name string) { v.name = name }

// Shape is the value's shape.
func (v *Var) Shape() []int { return v.Value.Shape() }

// Item is the value of a one-element var.
func (v *Var) Item() float64 { return v.Value.Item() }

func (v *Var) String() string {
	return fmt.Sprintf("Var(%s %v %v grad=%v)", v.Name(), v.Value.DType(), v.Value.Shape(), v.requiresGrad)
}

// SetGradDType sets the dtype a leaf's Grad is kept in: its value's (the
// default), or, for a float32 leaf, bfloat16 or float16. A half Grad takes
// half the memory of a float32 one (llm.c keeps its gradients in bf16: a
// model's gradients are the peak of a step under a device budget); a
// gradient arriving in float32 is rounded once to it, and a second one in
// the same Grad is summed in float32 and rounded again. Gradient clipping
// (tensor.SumSquaresAll, tensor.ScaleAll) takes half gradients; optimizers
// widen them as they read them (nn.AdamW). It fails, naming the problem,
// on a non-leaf, on a leaf holding a gradient (ZeroGrad first), and on
// any other dtype.
func (v *Var) SetGradDType(dt tensor.DType) error {
	switch {
	case !v.IsLeaf():
		return fmt.Errorf("autograd: SetGradDType on non-leaf %s: only leaves keep a Grad", v)
	case v.Grad != nil && v.Grad.DType() != dt:
		return fmt.Errorf("autograd: SetGradDType(%v) on %s, which holds a %v gradient: ZeroGrad first", dt, v, v.Grad.DType())
	case dt == v.Value.DType():
		v.hasHalfGrad = false
		return nil
	case dt.IsHalf() && v.Value.DType() == tensor.Float32:
		v.halfGrad, v.hasHalfGrad = dt, true
		return nil
	}
	return fmt.Errorf("autograd: SetGradDType(%v) on %s: a gradient is kept in its value's dtype or, for a float32 value, in bfloat16 or float16", dt, v)
}

// GradDType is the dtype v's Grad is kept in (SetGradDType).
func (v *Var) GradDType() tensor.DType {
	if v.hasHalfGrad {
		return v.halfGrad
	}
	return v.Value.DType()
}

// ZeroGrad releases the accumulated gradient (PyTorch's set_to_none).
func (v *Var) ZeroGrad() {
	if v.Grad != nil {
		v.Grad.Release()
		v.Grad = nil
	}
}

// Detach returns a leaf sharing v's value, cut from the graph.
func (v *Var) Detach() *Var { return &Var{Value: v.Value.Alias()} }

// gradKey is autograd's slot in a tensor.Ctx: a *gradState.
var gradKey = tensor.NewCtxKey("autograd")

// gradState is autograd's state in one context: the grad mode (recording
// is off while off > 0) and the position of the context's random stream.
type gradState struct {
	off     atomic.Int32
	rng     atomic.Uint64
	anomaly atomic.Int32 // DetectAnomalyIn's depth (anomaly.go)
	// grad is the Grad pass whose step of a region node (RecordRegion) is
	// running its backward in this context, for RegionGrad; nil in a
	// Backward pass.
	grad *capture
	// capturing counts the Grad passes in progress in the context: no
	// backward may write a leaf's Grad then (gradInPlace).
	capturing atomic.Int32
	// floor is the orphan floor (WithOrphanFloor): Record adopts no
	// orphan of a var recorded at or before it.
	floor atomic.Uint64
}

func stateOf(c *tensor.Ctx) *gradState {
	if c == nil {
		c = tensor.Background()
	}
	return c.ValueOrInit(gradKey, func() any { return new(gradState) }).(*gradState)
}

// RandomOffset reserves n numbers of context c's random stream and
// returns the first. Random ops (Dropout, the attention's dropout) draw
// their masks from (seed, offset), so the stream's position is all the
// random state a context has: each goroutine's stream is its own, a run
// repeats exactly, and checkpointing replays a region's masks by saving
// and restoring the position (RandomState, SetRandomState), as PyTorch's
// checkpoint forks its generator. A nil c means Background. A negative n
// panics with an *tensor.OpError wrapping tensor.ErrArgument: it moved
// the stream back, so later masks repeated earlier ones.
func RandomOffset(c *tensor.Ctx, n int) uint64 {
	if n < 0 {
		panic(&tensor.OpError{Op: "autograd.RandomOffset", Msg: fmt.Sprintf("n = %d, want >= 0", n), Err: tensor.ErrArgument})
	}
	return stateOf(c).rng.Add(uint64(n)) - uint64(n)
}

// RandomState is the position of c's random stream.
func RandomState(c *tensor.Ctx) uint64 { return stateOf(c).rng.Load() }

// SetRandomState moves c's random stream to position s.
func SetRandomState(c *tensor.Ctx, s uint64) { stateOf(c).rng.Store(s) }

// NoGradIn runs fn without recording the graph in context c (evaluation,
// optimizer steps): ops over c's tensors then return leaves. Other
// contexts, and other goroutines, are not affected. A nil fn panics with
// an *tensor.OpError wrapping tensor.ErrArgument, as tensor.Ctx.WithScope's
// does.
func NoGradIn(c *tensor.Ctx, fn func()) {
	if fn == nil {
		panic(&tensor.OpError{Op: "autograd.NoGrad", Msg: "nil fn", Err: tensor.ErrArgument})
	}
	st := stateOf(c)
	st.off.Add(1)
	defer st.off.Add(-1)
	fn()
}

// NoGrad is NoGradIn(tensor.Background(), fn), for one-goroutine programs.
func NoGrad(fn func()) { NoGradIn(tensor.Background(), fn) }

// GradEnabledIn reports whether ops over c's tensors record the graph now.
func GradEnabledIn(c *tensor.Ctx) bool { return stateOf(c).off.Load() == 0 }

// GradEnabled is GradEnabledIn(tensor.Background()).
func GradEnabled() bool { return GradEnabledIn(tensor.Background()) }

// Record makes the var for an op's output. When recording is on in the
// output's context and some input requires gradients, the var gets a node
// with backward; saved are extra tensors backward needs (released after
// it runs, or by the scope). This is how every op of this package is
// written, and how users write custom ops: compute the forward with
// tensor ops, then Record it with its backward beside it.
//
// An output that belongs to no context (an op on parameters alone, see
// tensor.Ctx) is recorded whenever an input requires gradients: whether
// it is differentiated is decided by the context it meets next. An output
// of a context adopts the orphans its inputs' graphs hold (a chain of ops
// on parameters alone that met the context's data here), as the op
// adopted its operands, so that the scope releases the whole graph. An
// output of an integer dtype (a Cast to int32) is not differentiable and
// is never recorded, as in PyTorch.
//
// A recorded var owns out (Backward releases it once nothing needs it)
// and its node owns saved. An input's own Value given as out (an identity
// op, a gradient reversal) or as a saved tensor, and out given as a saved
// tensor, are taken as views of their own (Tensor.Alias), so that
// Backward releases those and not the input's value or v's.
//
// The versions of the inputs' values and of the saved tensors
// (tensor.Tensor.Version) are recorded with the node: Backward fails with
// ErrModified rather than run backward after one of them was written in
// place (see the package documentation). A backward that reads out
// should list it among saved.
func Record(op string, out *tensor.Tensor, inputs []*Var, backward BackwardFunc, saved ...*tensor.Tensor) *Var {
	if out == nil {
		panic(&tensor.OpError{Op: "autograd.Record", Msg: fmt.Sprintf("op %s: nil output", op), Err: tensor.ErrArgument})
	}
	v := &Var{Value: out, op: op}
	if c := out.Ctx(); c != nil && !GradEnabledIn(c) || !out.DType().IsFloat() {
		// A leaf, as below, whose values Leaves still traces to its inputs:
		// a checkpointed region that runs an op under NoGrad on a tensor it
		// closed over recomputes it from that tensor, which must be watched.
		v.from = inputs
		return v
	}
	for _, in := range inputs {
		if in != nil && in.requiresGrad {
			v.requiresGrad = true
			break
		}
	}
	if !v.requiresGrad {
		v.from = inputs // a leaf, whose values Leaves still traces to them
	}
	if v.requiresGrad {
		if backward == nil {
			panic(&tensor.OpError{Op: "autograd.Record", Err: tensor.ErrArgument,
				Msg: fmt.Sprintf("op %s: nil backward function for inputs that require gradients", op)})
		}
		v.Value, saved = owned(out, inputs, saved)
		v.node = &node{op: op, inputs: inputs, backward: backward, saved: saved, seq: nodeSeq.Add(1)}
		v.node.watchAll()
		recordSite(v.node, recordingCtx(out, inputs))
		if c := out.Ctx(); c != nil {
			adoptOrphansBelow(c, inputs, nil)
		}
	}
	return v
}

// adoptOrphansBelow hands to c's innermost scope the orphans (values of
// ops on kept tensors alone that no scope owns, see tensor.Ctx) held by
// the graphs of inputs, an op of c having just combined them with c's
// data: the op adopted its operands, as every op does; this adopts what
// their nodes save and, through the vars whose values were orphans, the
// chain of ops on parameters alone below them, which only the graph held.
// A graph never differentiated, or one whose backward pass failed before
// reaching them, is then released with the scope, as the rest of it is.
// A region's node (RecordRegion) is not walked through, and vars
// recorded before c's orphan floor (a checkpointed region's forward
// pass, WithOrphanFloor) are left as they are; floor is read once, at the
// first orphan met. For an op over c's data alone it looks at its inputs'
// nodes and stops.
func adoptOrphansBelow(c *tensor.Ctx, inputs []*Var, floor *uint64) {
	for _, in := range inputs {
		if in == nil || in.node == nil || in.node.region {
			continue // a checkpointed region's node: the region keeps what it closed over (package checkpoint)
		}
		n := in.node
		for _, s := range n.saved {
			if s != nil && s.Ctx() == nil && !s.Released() && n.seq > orphanFloor(c, &floor) {
				c.AdoptOrphan(s)
			}
		}
		for _, u := range n.inputs {
			if u != nil && u.node != nil && u.Value.Ctx() == nil && !u.Value.Released() &&
				u.node.seq > orphanFloor(c, &floor) && c.AdoptOrphan(u.Value) {
				adoptOrphansBelow(c, []*Var{u}, floor)
			}
		}
	}
}

// orphanFloor is c's orphan floor (WithOrphanFloor), read into *floor at
// the first call: 0 without a look at c while no WithOrphanFloor runs in
// the process (a parameter saved by a node is no orphan, but is met).
func orphanFloor(c *tensor.Ctx, floor **uint64) uint64 {
	if *floor == nil {
		var f uint64
		if orphanFloors.Load() > 0 {
			f = stateOf(c).floor.Load()
		}
		*floor = &f
	}
	return **floor
}

// orphanFloors counts the WithOrphanFloor calls running, in every context.
var orphanFloors atomic.Int64

// WithOrphanFloor runs fn with c's ops adopting the orphans below their
// operands (see Record) only from the vars recorded after mark (NodeMark):
// a checkpointed region's forward pass, whose scope releases its own
// graph's orphans and leaves those of the graph before it (the computed
// vars its function closed over, and what they were computed from) to
// the caller's. The previous floor is restored when fn returns or panics.
// A nil fn panics with an *tensor.OpError wrapping tensor.ErrArgument.
func WithOrphanFloor(c *tensor.Ctx, mark uint64, fn func()) {
	if fn == nil {
		panic(&tensor.OpError{Op: "autograd.WithOrphanFloor", Msg: "nil fn", Err: tensor.ErrArgument})
	}
	st := stateOf(c)
	old := st.floor.Swap(mark)
	orphanFloors.Add(1)
	defer func() {
		st.floor.Store(old)
		orphanFloors.Add(-1)
	}()
	fn()
}

// owned returns the output and the saved tensors of a recorded op as its
// var and node may release them after backward: an input's value given
// as either, and out given as a saved tensor, replaced by a view of its
// own (see Record). saved is copied before any entry is replaced.
func owned(out *tensor.Tensor, inputs []*Var, saved []*tensor.Tensor) (*tensor.Tensor, []*tensor.Tensor) {
	isInput := func(t *tensor.Tensor) bool {
		return slices.ContainsFunc(inputs, func(in *Var) bool { return in != nil && in.Value == t })
	}
	alias := func(t *tensor.Tensor) *tensor.Tensor { return aliasFor(t, out, inputs) }
	orig := out
	if isInput(out) {
		out = alias(out)
	}
	copied := false
	for i, s := range saved {
		if s != nil && (s == orig || isInput(s)) {
			if !copied {
				saved, copied = slices.Clone(saved), true
			}
			saved[i] = alias(s)
		}
	}
	return out, saved
}

// aliasFor returns a view of t of its own for an op with output out and
// inputs to keep. An alias of a kept tensor (a parameter) belongs to no
// scope: it joins the recording's context's innermost scope, as an op's
// output does, so that a graph never differentiated is released with it.
func aliasFor(t, out *tensor.Tensor, inputs []*Var) *tensor.Tensor {
	a := t.Alias()
	if a.Ctx() == nil {
		recordingCtx(out, inputs).Adopt(a)
	}
	return a
}

// recordingCtx is the context of a recorded op: its output's, else its
// first input's with one, else Background.
func recordingCtx(out *tensor.Tensor, inputs []*Var) *tensor.Ctx {
	if c := out.Ctx(); c != nil {
		return c
	}
	for _, in := range inputs {
		if in != nil && in.Value != nil {
			if c := in.Value.Ctx(); c != nil {
				return c
			}
		}
	}
	return tensor.Background()
}

// gradRole is the memory role of everything Backward allocates.
const gradRole = memory.RoleGradient

// Drop releases v's value now while keeping v in the graph, so gradients
// still flow through it. Model code calls it on intermediates that no
// backward reads (the output of a Linear that only feeds a reshape and a
// copy, say): their memory is then free during the rest of the forward
// pass instead of until backward. If a backward does read a dropped value
// it panics with tensor.ErrReleased, naming the op.
func (v *Var) Drop() {
	if v.node == nil || v.retain {
		return // leaves and retained vars keep their values
	}
	v.Value.Release()
}
