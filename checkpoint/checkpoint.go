package checkpoint

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/strata-ml/strata/amp"
	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/tensor"
)

// Func is a checkpointed computation: a deterministic function of its
// inputs (and of parameters it closes over) returning one value it
// computes. It is run twice, in the forward pass and again when backward
// reaches it, so it must draw random numbers only from its context's
// stream (autograd.RandomOffset, as nn.Dropout does), read no state that
// changes in between, and not release its inputs. It may close over
// parameters, constants and vars computed outside it with graphs of their
// own (a table made once for every block): those become inputs of the
// region's node (Var.Outer), stand as leaves in the recomputation, and
// get their gradients through the outer graph, as in the plain graph.
// Backward fails with autograd.ErrModified when a leaf or tensor it read
// was written in place between the passes; a raw tensor read only by the
// forward pass is not watched. A var it reads off the path to its result
// (only in a side computation) is no input of the region's node, so
// backward may release it before the recomputation: pass it as an input,
// or Retain it (else backward fails with tensor.ErrReleased, naming the
// region).
type Func func(inputs ...*autograd.Var) *autograd.Var

// Options say how a region is checkpointed. The zero value recomputes
// everything.
type Options struct {
	// Policy picks the op outputs to keep from the forward pass instead of
	// recomputing them (selective checkpointing); nil keeps none.
	Policy Policy
	// Offload, when set, moves what the regions hold between the passes
	// to host memory and back ahead of their backward (see Offload); nil
	// keeps it on the device. Share one among a model's regions.
	Offload *Offload
}

// Apply is Options{}.Apply: fn(inputs...) checkpointed, every intermediate
// recomputed in backward.
func Apply(fn Func, inputs ...*autograd.Var) *autograd.Var { return Options{}.Apply(fn, inputs...) }

// Apply returns fn(inputs...) without keeping its intermediates for
// backward: they are freed as fn returns, and when backward reaches the
// result, fn runs again on the inputs (with the random stream and the
// autocast state of the first run) and the gradient is back-propagated
// through that recomputed graph. Gradients reach every input that requires
// them and every parameter fn uses (into its Grad, as without
// checkpointing), bit for bit the same as without checkpointing when each
// input and parameter takes gradients from this region only (the package
// doc says when the last bits can differ); only the inputs, the result and
// the outputs o.Policy saves are held between the forward and the backward
// pass. Regions nest.
//
// The context is that of the inputs' values (tensor.CtxOf; Background when
// none has one, whatever the caller's: fn must then not draw randomness
// from the caller's context, see the package doc's Contexts). A nil input is passed to fn as nil in both passes (an
// optional argument, as PyTorch's checkpoint passes None) and gets no
// gradient. With recording off there (NoGradIn), Apply is fn(inputs...).
// When fn returns nil, one of its inputs, or a value nothing in it needs
// a gradient for, there is nothing to recompute and the result is fn's
// (what o.Policy saved is freed).
//
// Panics with an *tensor.OpError wrapping tensor.ErrArgument when fn is
// nil, and as fn does; backward panics (Backward returns the error) with an
// *tensor.OpError wrapping tensor.ErrArgument when the recomputation does
// not repeat the forward pass (another shape, other random draws, other
// saved ops): fn was not deterministic; and with one wrapping
// tensor.ErrReleased, naming the input, when an input's value was
// released before backward reached the region (Var.Drop, which the plain
// graph allows when no consumer's backward reads the var: the
// recomputation does).
func (o Options) Apply(fn Func, inputs ...*autograd.Var) *autograd.Var {
	if fn == nil {
		panic(&tensor.OpError{Op: "checkpoint.Apply", Msg: "nil Func fn", Err: tensor.ErrArgument})
	}
	vals := make([]*tensor.Tensor, len(inputs))
	for i, x := range inputs {
		if x != nil { // a nil input reaches fn as nil, in both passes
			vals[i] = x.Value
		}
	}
	c := tensor.CtxOf(vals...)
	if !autograd.GradEnabledIn(c) {
		return fn(inputs...)
	}
	if c == tensor.Background() {
		// A region over kept tensors alone (or Background's data) opens
		// scopes in Background and uses its slots; goroutines working in
		// contexts of their own may run such regions at once, so each
		// holds Background while it does (forward here; backward, in
		// autograd.RecordRegion's node, likewise).
		var y *autograd.Var
		tensor.WithBackground(func() { y = o.apply(fn, inputs, vals, c) })
		return y
	}
	return o.apply(fn, inputs, vals, c)
}

// apply is Apply in context c, with recording on there.
func (o Options) apply(fn Func, inputs []*autograd.Var, vals []*tensor.Tensor, c *tensor.Ctx) *autograd.Var {
	r := &region{fn: fn, inputs: inputs, c: c, rng: autograd.RandomState(c), amp: amp.Current(c), kept: true}
	for _, v := range vals {
		if v != nil && v.Ctx() != nil {
			r.kept = false
		}
	}
	if o.Policy != nil {
		r.rec = &recorder{c: c, policy: o.Policy}
	}
	// A region run by another's function, in its forward pass or its
	// recomputation, holds what it holds in that region's scope, which
	// frees it: the enclosing region's record in Offload covers it.
	nested := c.Value(regionKey) != nil
	out, val := r.forward()
	if r.through || !out.RequiresGrad() || out.IsLeaf() {
		// Nothing to recompute: a value fn made (no gradient) leaves with
		// val; a leaf fn closed over is left as it is.
		if val != nil && out.Value.Released() {
			out.Value = val
		} else {
			val.Release()
		}
		r.rec.release()
		return out
	}
	r.drew = autograd.RandomState(c) - r.rng
	r.shape, r.dtype = out.Value.Shape(), out.Value.DType()
	saved := r.rec.adopt()
	// The computed vars fn closed over are inputs of the region's node
	// too: the recomputation's backward stops at them and hands their
	// gradients to the outer graph (region.backward).
	// The region's node takes its gradient in the dtypes fn's result takes
	// it in (a LayerNormHalf's float32 gradient of its half output): the
	// recomputed result gets it as the plain graph's would, not rounded.
	//
	// The node lists them in the order the plain graph's backward walk
	// reaches them from fn's result (region.perm): the pass then steps the
	// ops above them in the plain graph's order, and a var upstream of two
	// of them sums its gradients as there, bit for bit.
	first := out.FirstReached(r.stops()...)
	if views := r.offPath(first); views != nil {
		for _, t := range views {
			saved = append(saved, c.Adopt(t))
		}
	}
	stops := r.stops()
	r.perm = firstReached(first, stops)
	if r.perm != nil {
		ordered := make([]*autograd.Var, len(stops))
		for k, i := range r.perm {
			ordered[k] = stops[i]
		}
		stops = ordered
	}
	y := autograd.RecordRegion("Checkpoint", val, stops, r.backward, saved...).TakesGradLike(out)
	// What the recomputation reads and this region checks, for a region
	// whose function runs this one (closeOver finds it with Reads): its
	// recomputation makes this region again, after any write. A region
	// in the same context finds this one as nested too; one in another
	// (this region's inputs are kept tensors, its context Background)
	// does not.
	var also []autograd.Read
	for _, l := range r.closed {
		if !l.v.Value.Released() {
			also = append(also, autograd.Read{Tensor: l.v.Value, Version: l.ver})
		}
	}
	y.AlsoReads(append(also, r.reads...)...)
	if o.Offload != nil && !nested {
		r.off, r.held = o.Offload, o.Offload.add(c, saved, r.inputs, y.Value)
	}
	return y
}

// regionKey is the slot of a context's region whose forward pass is
// running (a *region) or that is being recomputed (recomputing), or nil.
var regionKey = tensor.NewCtxKey("checkpoint.region")

// recomputing is regionKey's value while a region's function runs again
// in backward.
type recomputing struct{}

// region is one checkpointed call: what its recomputation needs.
type region struct {
	// nested are the regions made by this one's forward pass: their
	// checks are this region's too (closeOver), for the recomputation
	// makes them again, after any write.
	nested []*region
	fn     Func
	inputs []*autograd.Var
	// hidden are the computed vars (with graphs of their own) that fn
	// closed over: a mask or table made once for every block. They are
	// inputs of the region's node after inputs, and stand as leaves in
	// the recomputation (autograd.AsLeaves, Var.Outer).
	hidden []*autograd.Var
	// perm orders the region node's inputs: the k-th is stops()[perm[k]];
	// nil when they are in stops' order (firstReached).
	perm []int
	// through is set when fn returned one of its inputs, a computed var
	// it closed over, or nil: nothing to recompute.
	through bool
	c       *tensor.Ctx
	rng     uint64    // c's random stream before the forward pass
	drew    uint64    // the random numbers the forward pass drew
	amp     amp.State // c's autocast state in the forward pass
	rec     *recorder // the selective policy's saved outputs; nil without a policy
	off     *Offload  // moves what the region holds off the device; nil: none
	held    *held     // the region's record in off
	// closed holds the leaves fn's graph reached that are no inputs (the
	// parameters and constants it closed over), with the versions of
	// their values after the forward pass: the recomputation reads them.
	closed []closedLeaf
	// reads are views of the tensors the forward graph's backward
	// functions read that outlive the region's scope (the ids and targets
	// fn closed over), with their versions then: the recomputation reads
	// them too (closeOver, keepReads).
	reads []autograd.Read
	// readCtx is the context of the tensor each view of reads was made of,
	// from closeOver to keepReads.
	readCtx []*tensor.Ctx
	shape   []int
	dtype   tensor.DType
	// kept is set when no input belongs to a context (kept tensors, nil):
	// the result is then placed as an op's on kept tensors alone is (an
	// orphan, which joins the context of the first op that meets it).
	kept bool
}

// forward runs fn in a scope of its own, and under autocast in a region
// of its own, so that every intermediate and every weight copy is freed as
// it returns; the result's value (and the outputs the policy
// saves) move to the caller's scope. fn runs with recording on, so the
// result knows whether anything in the region needs a gradient (a
// parameter, when no input does) and Var.Drop frees what model code drops;
// the graph it records is dropped with the scope.
func (r *region) forward() (out *autograd.Var, val *tensor.Tensor) {
	c := r.c
	done := false
	defer func() {
		if !done {
			r.rec.release()
		}
	}()
	s := c.NewScope()
	var escaped []*tensor.Tensor // closed-over values the region's scope took (rescue)
	var home *tensor.Ctx         // the context of fn's result (nil: an orphan)
	func() {
		defer s.Close()
		// In an autocast region of its own, as the recomputation runs: the
		// weights' low-precision copies cast in here serve this pass only
		// and go as it returns, where the enclosing region's cache would
		// hold every checkpointed block's until the whole forward pass is
		// over (gpt2-medium in bf16: 576 MiB at the forward pass's peak).
		// Without autocast the region changes nothing.
		if parent, _ := c.Value(regionKey).(*region); parent != nil {
			parent.nested = append(parent.nested, r)
		}
		old := c.SetValue(regionKey, r)
		defer c.SetValue(regionKey, old)
		mark := autograd.NodeMark()
		amp.With(c, r.amp, func() {
			autograd.WithOrphanFloor(c, mark, func() {
				autograd.WithOpHook(c, r.rec.hook(), func() { out = r.fn(r.inputs...) })
			})
		})
		c.SetValue(regionKey, old)
		r.through = out == nil || slices.Contains(r.inputs, out)
		if !r.through {
			r.hidden = out.Outer(mark, r.inputs...)
			r.through = len(r.hidden) == 1 && r.hidden[0] == out
		}
		escaped = rescue(s, r.hidden)
		if !r.through {
			// A view of the result out of the region's scope while it
			// closes: the result's value itself may be one fn closed over
			// (a parameter, a constant of an outer scope), not the
			// region's to move.
			home = out.Value.Ctx()
			val = out.Value.Alias()
			tensor.Keep(val)
			r.closeOver(out)
		}
	}()
	for _, t := range escaped {
		c.Adopt(t)
	}
	if val != nil {
		switch {
		case !r.kept:
			c.Adopt(val) // the region's context: its node's and its recomputation's
		case home == nil || home == tensor.Background():
			// A region over kept tensors alone (Background): its result is
			// placed as an op's on kept tensors alone is, owned by
			// Background's innermost scope when one is open, else an
			// orphan that the caller's context adopts at the first op
			// that meets it (Adopt would leave it in Background, owned
			// by no scope, when backward never reaches the region).
			o := val.Alias()
			val.Release()
			val = o
		default:
			// A region over kept tensors whose function computed from the
			// caller's data it closed over: the caller's context.
			home.Adopt(val)
		}
		r.keepReads()
		if !out.IsLeaf() && out.Value.Ctx() == nil {
			// Computed in the region from kept tensors alone (closed-over
			// parameters): no scope released it; val holds its bytes.
			out.Value.Release()
		}
	}
	done = true
	return out, val
}

// stops are the region node's inputs: fn's inputs, then the computed vars
// it closed over.
func (r *region) stops() []*autograd.Var {
	return append(r.inputs[:len(r.inputs):len(r.inputs)], r.hidden...)
}

// offPath replaces each computed input of r that fn's result does not
// reach (first: the stops it reaches) with a constant over a view of its
// value (requiring a gradient as the input does), and returns the views.
// The plain graph's backward never walks into such an input from the
// region, so neither may the region's node: the pass would step the ops
// above it in another order. The node keeps the view instead (a saved
// tensor, released after its backward), which the recomputation reads
// once the input's own value is released.
func (r *region) offPath(first []*autograd.Var) []*tensor.Tensor {
	var views []*tensor.Tensor
	for i, x := range r.inputs {
		if x == nil || x.IsLeaf() || slices.Contains(first, x) {
			continue
		}
		if views == nil {
			r.inputs = slices.Clone(r.inputs) // the caller's slice
		}
		v := x.Value.Alias()
		views = append(views, v)
		k := autograd.Const(v)
		k.SetRequiresGrad(x.RequiresGrad())
		for j := i; j < len(r.inputs); j++ {
			if r.inputs[j] == x { // an input passed twice: one constant
				r.inputs[j] = k
			}
		}
	}
	return views
}

// firstReached returns the positions of stops (the region node's inputs)
// in the order the backward walk from fn's result first reaches them
// (first, autograd.Var.FirstReached), those it does not reach (leaves)
// last; nil when that is stops' own order.
func firstReached(first, stops []*autograd.Var) []int {
	rank := func(i int) int {
		if k := slices.Index(first, stops[i]); k >= 0 {
			return k
		}
		return len(first)
	}
	perm := make([]int, len(stops))
	for i := range perm {
		perm[i] = i
	}
	slices.SortStableFunc(perm, func(a, b int) int { return cmp.Compare(rank(a), rank(b)) })
	for k, i := range perm {
		if k != i {
			return perm
		}
	}
	return nil
}

// backward recomputes the region on detached copies of its inputs (and
// with the computed vars fn closed over standing as leaves), with the
// random stream and autocast state of the forward pass, and
// back-propagates g through the recomputed graph: parameters inside get
// their gradients there; the inputs' and the closed-over computed vars'
// gradients are returned to the engine.
// RecordRegion runs it with recording on. The stream and the autocast
// state are put back before the inner backward pass, which runs as the
// plain graph's backward would: outside the region's autocast state.
func (r *region) backward(g *tensor.Tensor) []*tensor.Tensor {
	c := r.c
	r.checkReleased()
	r.checkClosed()
	if r.off != nil {
		r.off.enter(c, r.held)
		defer r.off.leave(c, r.held)
	}
	grads := make([]*tensor.Tensor, len(r.inputs)+len(r.hidden))
	s := c.NewScope()
	var escaped []*tensor.Tensor
	func() {
		defer s.Close()
		det := make([]*autograd.Var, len(r.inputs))
		for i, x := range r.inputs {
			if x == nil {
				continue
			}
			if j := slices.Index(r.inputs, x); j < i {
				// An input passed twice is one leaf, as it is one var in
				// the plain graph: its uses' gradients add up in the
				// plain graph's order, and the first place returns them.
				det[i] = det[j]
				continue
			}
			det[i] = x.Detach()
			if x.Value.Ctx() == nil {
				// A kept tensor (a parameter passed as an input): kept as
				// in the forward pass, so that the ops on it alone run as
				// they did there (in no context: without the region's op
				// hook, in Background's autocast state) and not in the
				// region's context, where a policy's replay would meet ops
				// the forward pass never showed it.
				tensor.Keep(det[i].Value)
				defer det[i].Value.Release()
			} else {
				c.Adopt(det[i].Value)
			}
			det[i].SetRequiresGrad(x.RequiresGrad())
		}
		// The computed vars fn closed over stand as leaves while the
		// region is recomputed and differentiated: the inner pass stops at
		// them, and their gradients go to the outer graph with the inputs'.
		autograd.AsLeaves(r.hidden, func() {
			out, drew := r.recompute(det)
			r.check(out, drew)
			// In a Backward pass the parameters inside get their
			// gradients here; in a Grad pass through the region, Grad's
			// leaves among them get theirs in its results (RegionGrad).
			gs, err := autograd.RegionGrad(out, g, append(det, r.hidden...))
			if out.Value.Ctx() == nil {
				out.Value.Release() // made of closed-over parameters alone: in no scope
			}
			if err != nil {
				if oe, ok := err.(*tensor.OpError); ok {
					panic(oe)
				}
				panic(&tensor.OpError{Op: "checkpoint.Apply", Msg: "backward through the recomputed region", Err: err})
			}
			copy(grads, gs)
		})
		escaped = rescue(s, r.hidden)
	}()
	for _, t := range escaped {
		c.Adopt(t) // the pass's scope: the outer graph reads it later in this pass
	}
	for i, gi := range grads {
		switch {
		case gi == nil:
		case r.kept:
			// A region over kept tensors alone: its gradients are placed
			// as an op's on kept tensors alone is (as forward places its
			// result), not in Background, whose innermost scope may be
			// another goroutine's once this one lets go of Background.
			tensor.Keep(gi)
			grads[i] = gi.Alias()
			gi.Release()
		default:
			c.Adopt(gi) // kept by the inner backward; the engine releases it
		}
	}
	if r.perm != nil { // in the node's order of its inputs
		ordered := make([]*tensor.Tensor, len(grads))
		for k, i := range r.perm {
			ordered[k] = grads[i]
		}
		grads = ordered
	}
	return grads
}

// rescue takes out of scope s (Keep) the values of the computed vars fn
// closed over that s owns, and returns them for the caller to adopt once s
// has closed. Such a value was made from kept tensors alone (an orphan,
// see tensor.Ctx: a table computed from parameters) before the region ran,
// and the first op in the region that combined it with the context's
// data adopted it into s, which would release it as the region returns:
// the plain graph's op adopts it into the caller's scope, where the outer
// graph (its own op's backward, another region) still reads it.
func rescue(s *tensor.Scope, hidden []*autograd.Var) []*tensor.Tensor {
	var ts []*tensor.Tensor
	for _, h := range hidden {
		if s.Owns(h.Value) {
			tensor.Keep(h.Value)
			ts = append(ts, h.Value)
		}
	}
	return ts
}

// recompute runs fn on the detached inputs with the random stream where
// the forward pass found it and the forward's autocast state, and the
// saved outputs handed back; it returns fn's result and how many random
// numbers it drew. The stream and the autocast state are put back.
func (r *region) recompute(det []*autograd.Var) (out *autograd.Var, drew uint64) {
	c := r.c
	now := autograd.RandomState(c)
	autograd.SetRandomState(c, r.rng)
	defer autograd.SetRandomState(c, now)
	defer func() {
		if e := recover(); e != nil {
			panic(releasedRead(e))
		}
	}()
	old := c.SetValue(regionKey, recomputing{})
	defer c.SetValue(regionKey, old)
	amp.With(c, r.amp, func() {
		c.WithRole(memory.RoleActivation, func() {
			autograd.WithOpHook(c, r.rec.replay(), func() { out = r.fn(det...) })
		})
	})
	return out, autograd.RandomState(c) - r.rng
}

// releasedRead turns a recomputation's panic over a released tensor (an
// *tensor.OpError wrapping tensor.ErrReleased from an op of fn) into one
// that names the region and says why: the region checks its inputs and
// the vars on its result's graph before it recomputes (checkReleased), so
// this is a value fn read off that graph (a var read only by a side
// computation, a Value read directly), which backward or Var.Drop
// released before it reached the region. Any other panic is returned as
// it came.
func releasedRead(e any) any {
	oe, ok := e.(*tensor.OpError)
	if !ok || !errors.Is(oe, tensor.ErrReleased) || strings.HasPrefix(oe.Op, "checkpoint.") {
		return e
	}
	return &tensor.OpError{Op: "checkpoint.Apply", Err: oe,
		Msg: "the recomputation read a tensor released since the forward pass: a value the checkpointed function read " +
			"off the path to its result (a var used only by a side computation, or a Value read directly), which backward " +
			"or Var.Drop released before it reached the region (pass its var as an input of the region, or Retain it)"}
}

// check panics when the recomputation did not repeat the forward pass.
func (r *region) check(out *autograd.Var, drew uint64) {
	var msg string
	switch {
	case out == nil:
		msg = "returned nil"
	case !slices.Equal(out.Value.Shape(), r.shape) || out.Value.DType() != r.dtype:
		msg = fmt.Sprintf("returned %v %v, the forward pass %v %v", out.Value.DType(), out.Value.Shape(), r.dtype, r.shape)
	case drew != r.drew:
		msg = fmt.Sprintf("drew %d random numbers, the forward pass %d", drew, r.drew)
	case !out.RequiresGrad() || out.IsLeaf():
		msg = "returned a value without a graph"
	default:
		msg = r.rec.unfinished()
	}
	if msg != "" {
		panic(&tensor.OpError{Op: "checkpoint.Apply", Msg: "the recomputation " + msg + ": the checkpointed function is not deterministic", Err: tensor.ErrArgument})
	}
}

// closedLeaf is a leaf a region's function closed over, with its value's
// version after the forward pass.
type closedLeaf struct {
	v   *autograd.Var
	ver uint64
}

// closeOver records the leaves out's graph reaches that are not the
// region's inputs, with their values' versions (tensor.Tensor.Version),
// and a view (kept out of the region's scope) of each tensor its backward
// functions read, with the version recorded with it.
func (r *region) closeOver(out *autograd.Var) {
	for _, l := range out.Leaves(r.stops()...) {
		if l.Value != nil {
			r.closed = append(r.closed, closedLeaf{v: l, ver: l.Value.Version()})
		}
	}
	reads := out.Reads(r.stops()...)
	for _, n := range r.nested { // what the regions inside check, made again by the recomputation
		r.closed = append(r.closed, n.closed...)
		reads = append(reads, n.reads...)
	}
	r.nested = nil
	for _, rd := range reads {
		if rd.Tensor.Released() || rd.Tensor.SharesStorage(out.Value) {
			continue // the result is not read by the recomputation
		}
		a := rd.Tensor.Alias()
		tensor.Keep(a)
		r.reads = append(r.reads, autograd.Read{Tensor: a, Version: rd.Version})
		r.readCtx = append(r.readCtx, rd.Tensor.Ctx())
	}
}

// keepReads, once the region's scope has closed, keeps the views of
// closeOver whose storage something outside the region still holds (a
// tensor fn closed over), in the caller's scope with the result, and
// releases the others: the region's own intermediates (freed now, as
// without the check), and what is checked or held another way: the
// inputs' values (the region's node checks them), the closed-over
// leaves' values (checkClosed), the outputs a policy saves (the region
// owns them). A view kept of those would hold them past the region's
// backward, until the caller's scope closes.
func (r *region) keepReads() {
	ours := map[*memory.Allocation]int{} // the views of closeOver on each storage
	for _, rd := range r.reads {
		ours[rd.Tensor.Allocation()]++
	}
	drop := map[*memory.Allocation]bool{} // decided before any is released
	for _, rd := range r.reads {
		a := rd.Tensor.Allocation()
		drop[a] = rd.Tensor.Views() == ours[a]
	}
	for _, x := range r.stops() {
		if x != nil && x.Value != nil && !x.Value.Released() {
			drop[x.Value.Allocation()] = true
		}
	}
	for _, l := range r.closed {
		if !l.v.Value.Released() {
			drop[l.v.Value.Allocation()] = true
		}
	}
	for _, t := range r.rec.outputs() {
		drop[t.Allocation()] = true
	}
	kept := r.reads[:0]
	for i, rd := range r.reads {
		if drop[rd.Tensor.Allocation()] {
			rd.Tensor.Release()
			continue
		}
		// In the scope of the context the tensor read belongs to: for a
		// region over kept tensors (Background) closing over the caller's
		// data, the caller's, not Background, where with no scope open
		// nothing would ever release the view.
		if h := r.readCtx[i]; h != nil {
			h.Adopt(rd.Tensor)
		} else {
			r.c.Adopt(rd.Tensor)
		}
		kept = append(kept, rd)
	}
	clear(r.reads[len(kept):])
	r.reads, r.readCtx = kept, nil
}

// checkReleased panics with an *tensor.OpError wrapping
// tensor.ErrReleased, naming the region and the input, when the value of
// an input (or of a computed var fn closed over) was released before
// backward reached the region: freed early with Var.Drop, which the plain
// graph allows for a var whose consumers' backward does not read it, or
// by a scope that closed. The recomputation reads it.
func (r *region) checkReleased() {
	for i, x := range r.stops() {
		if x == nil || x.Value == nil || !x.Value.Released() {
			continue
		}
		what := fmt.Sprintf("input %d", i)
		if i >= len(r.inputs) {
			what = "a computed var the checkpointed function closed over"
		}
		panic(&tensor.OpError{Op: "checkpoint.Apply", Err: tensor.ErrReleased,
			Msg: fmt.Sprintf("%s (%s %v %v) was released before backward reached the region (Var.Drop, or a scope that closed): "+
				"the recomputation reads it", what, x.Name(), x.Value.DType(), x.Value.Shape())})
	}
}

// checkClosed panics with an *tensor.OpError wrapping autograd.ErrModified
// when a parameter, constant or tensor the region's function closed over
// was written in place since the forward pass (an optimizer step before
// Backward, ids reused for the next batch): the recomputation would not
// repeat the forward pass, and the gradients would be taken at other
// values.
func (r *region) checkClosed() {
	for _, l := range r.closed {
		if l.v.Value.Released() {
			continue
		}
		if now := l.v.Value.Version(); now != l.ver {
			panic(&tensor.OpError{Op: "checkpoint.Apply", Err: autograd.ErrModified,
				Msg: fmt.Sprintf("%s (%v %v), which the checkpointed function reads, is at version %d, it was at version %d in the forward pass: "+
					"the recomputation would not repeat it (write it after Backward)", leafName(l.v), l.v.Value.DType(), l.v.Value.Shape(), now, l.ver)})
		}
	}
	for _, rd := range r.reads {
		if rd.Tensor.Released() {
			continue
		}
		if now := rd.Tensor.Version(); now != rd.Version {
			panic(&tensor.OpError{Op: "checkpoint.Apply", Err: autograd.ErrModified,
				Msg: fmt.Sprintf("a tensor (%v %v) the checkpointed function read is at version %d, it was at version %d in the forward pass: "+
					"the recomputation would not repeat it (write it after Backward)", rd.Tensor.DType(), rd.Tensor.Shape(), now, rd.Version)})
		}
	}
}

// leafName names a leaf in an error: its name, else "a constant" or "an
// unnamed parameter".
func leafName(v *autograd.Var) string {
	switch {
	case v.Name() != "":
		return v.Name()
	case v.RequiresGrad():
		return "an unnamed parameter"
	}
	return "a constant"
}
