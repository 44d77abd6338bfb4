package autograd

import (
	"errors"
	"fmt"
	"slices"

	"github.com/strata-ml/strata/tensor"
)

// ErrNoGraph: Backward on a var that has no graph (a leaf, a var made
// under NoGrad, or a graph already consumed by an earlier Backward), or
// whose graph reaches a var whose own graph an earlier Backward consumed
// (PyTorch raises there too, or differentiates through the freed graph;
// nothing here would reach the leaves below that var).
var ErrNoGraph = errors.New("autograd: no graph to differentiate")

// Backward computes the gradient of the scalar v with respect to every
// leaf that requires gradients and adds it to the leaf's Grad.
//
// It walks the graph once in reverse topological order. As soon as a
// node's backward has run, the node's saved tensors, the gradient of its
// output and its output value (unless retained, and except v itself) are
// released: the graph is consumed, as with PyTorch's retain_graph=False,
// and memory falls during the backward pass instead of at its end.
// Everything Backward allocates has memory role gradient and belongs to
// v's context (tensor.Ctx), or to a context of the pass's own for a v of
// none (a loss of parameters alone); gradients of leaves are kept out of
// it.
//
// BackwardOpts runs it keeping the graph for another pass.
//
// Errors: ErrNoGraph, a non-scalar v, or an *tensor.OpError raised by a
// backward function (out of memory, say), naming what one returned
// wrongly (a custom op's, see Record; BackwardFunc lists the checks and
// their errors: ErrArgument, ErrReleased, ErrShape, ErrDType,
// ErrDevice), wrapping ErrModified (an operand written in place since
// the forward pass) or, under DetectAnomalyIn, ErrNaN. A pass that fails
// midway keeps what it had done (leaves keep the gradients they
// received, stepped nodes stay consumed unless the pass retains the
// graph); the
// vars it did not step keep their graph and no gradient of it.
func (v *Var) Backward() error {
	if err := v.checkRoot("Backward", nil); err != nil {
		return err
	}
	return v.propagate(nil, pass{})
}

// BackwardOptions are the options of Var.BackwardOpts.
type BackwardOptions struct {
	// Grad is the gradient of the objective with respect to v, as
	// BackwardWith takes it; nil is ones, for a scalar v (Backward).
	Grad *tensor.Tensor
	// RetainGraph keeps the graph for another backward pass
	// (torch's retain_graph=True): the saved tensors and the values of
	// intermediate vars are not released as the pass goes, and the vars
	// keep their nodes, so the pass may run again (from v or from any var
	// below it); a later pass without it consumes the graph. What the
	// graph holds is released with the scopes that own it, as the values
	// of a graph never differentiated are. The pass's peak memory is then
	// that of the forward pass's end plus the gradients.
	RetainGraph bool
}

// BackwardOpts is Backward (o.Grad nil) or BackwardWith (o.Grad set),
// keeping the graph when o.RetainGraph is set. The errors are theirs.
func (v *Var) BackwardOpts(o BackwardOptions) error {
	if err := v.checkRoot("BackwardOpts", o.Grad); err != nil {
		return err
	}
	return v.propagate(o.Grad, pass{retain: o.RetainGraph})
}

// BackwardWith back-propagates grad, the gradient of some objective with
// respect to v, through v's graph: torch.autograd.backward(v, grad). v may
// have any shape; grad must have v's shape and dtype. It is Backward for a
// var that is not a scalar (Backward is BackwardWith of a ones tensor),
// and does what Backward does: the gradients of leaves accumulate into
// their Grad, the graph is consumed, and everything it allocates has role
// gradient and belongs to v's context. grad is read, not released.
// Activation checkpointing back-propagates through a recomputed region
// with it.
//
// Errors: ErrNoGraph, a nil grad, a released one (wrapping
// tensor.ErrReleased), one of another shape or dtype, one on another
// device (wrapping tensor.ErrDevice), or an *tensor.OpError raised by a
// backward function.
func (v *Var) BackwardWith(grad *tensor.Tensor) error {
	if err := v.checkRoot("BackwardWith", grad); err != nil {
		return err
	}
	if grad == nil {
		return fmt.Errorf("autograd: BackwardWith of %s: nil gradient", v.Name())
	}
	return v.propagate(grad, pass{})
}

// checkRoot returns the error of a backward pass (op) from v seeded with
// grad (nil: ones, for a scalar v), or nil when it can run.
func (v *Var) checkRoot(op string, grad *tensor.Tensor) error {
	if v == nil || v.Value == nil {
		return &tensor.OpError{Op: "autograd." + op, Msg: "nil *autograd.Var or one with no value", Err: tensor.ErrArgument}
	}
	if v.node == nil {
		return noGraph(v)
	}
	switch {
	case grad == nil && op == "BackwardWith":
		return nil // BackwardWith's own error
	case grad == nil && v.Value.Numel() != 1:
		return fmt.Errorf("autograd: %s of %s: want a scalar, have shape %v (reduce it first)", op, v.Name(), v.Value.Shape())
	case grad == nil:
		return nil
	case grad.Released():
		return fmt.Errorf("autograd: %s of %s: the gradient was released: %w", op, v.Name(), tensor.ErrReleased)
	case !slices.Equal(grad.Shape(), v.Value.Shape()) || grad.DType() != v.Value.DType() && !(op == "RegionGrad" && v.node.takes(grad.DType())):
		// RegionGrad also takes a dtype v's op takes its gradient in (Var.TakesGradLike)
		return fmt.Errorf("autograd: %s of %s: gradient %v %v for a value of %v %v",
			op, v.Name(), grad.DType(), grad.Shape(), v.Value.DType(), v.Value.Shape())
	case grad.Device() != v.Value.Device():
		return fmt.Errorf("autograd: %s of %s: gradient on %v for a value on %v: %w",
			op, v.Name(), grad.Device(), v.Value.Device(), tensor.ErrDevice)
	}
	return nil
}

// noGraph is the ErrNoGraph of a backward pass from v, which has no
// node, saying why.
func noGraph(v *Var) error {
	var why string
	switch {
	case v.consumed:
		why = "its graph was consumed by an earlier Backward (compute it again, or keep it with BackwardOpts' RetainGraph)"
	case v.op == "":
		why = "a leaf (Param or Const), not the output of an op"
	case !v.Value.DType().IsFloat():
		why = fmt.Sprintf("an output of dtype %v is not differentiable", v.Value.DType())
	default:
		why = fmt.Sprintf("no input of %s required gradients when it ran, or recording was off (NoGrad)", v.op)
	}
	return fmt.Errorf("%w: %s: %s", ErrNoGraph, v, why)
}

// propagate runs the backward pass p from v, seeded with grad (ones when
// grad is nil).
func (v *Var) propagate(grad *tensor.Tensor, p pass) (err error) {
	// An optimizer update overlapped with the forward pass ends here
	// (tensor.WaitOverlapped): the backward pass makes new gradients where
	// the update's old ones were.
	if err := tensor.WaitOverlapped(v.Value.Device()); err != nil {
		return err
	}
	order, err := topo(v)
	if err != nil {
		return err
	}
	defer dropPending(order)
	c := v.Value.Ctx()
	if c == nil {
		// A root of no context (a loss of parameters alone, see
		// tensor.Ctx): the pass runs in a context of its own, not in
		// Background, whose innermost scope may be another goroutine's
		// (one doing its work there, or another such pass).
		c = tensor.NewCtx()
	} else if p.retain {
		adoptOrphans(c, order)
	}
	var hooks *gradPass
	if p.capture == nil { // Grad fills no leaf's Grad: no hook fires
		// The pass counting the hooked leaves is looked for in v's context;
		// a region's output made of closed-over parameters alone has none,
		// and its gradient is then the outer pass's (RegionGrad).
		hc := c
		if v.Value.Ctx() == nil && grad != nil && grad.Ctx() != nil {
			hc = grad.Ctx()
		}
		hooks = beginGradPass(hc, order) // nil unless some leaf has a gradient hook (gradhook.go)
		defer hooks.end()
		p.hooks = hooks
		if p.hooks == nil { // nested in a pass that counts (or none)
			p.hooks, _ = hc.Value(passKey).(*gradPass)
		}
	} else {
		p.capture.prepare(order)
		st := stateOf(c)
		st.capturing.Add(1) // no backward writes a leaf's Grad (gradInPlace)
		defer st.capturing.Add(-1)
	}
	p.anomaly = AnomalyDetectionIn(v.Value.Ctx()) // Background's for a root of none
	if !p.retain && v.Value.Ctx() != nil {
		// A pass that fails midway leaves the nodes it did not step with
		// their graph, released with the scopes that own it; the orphans
		// among what they hold are owned by none.
		defer func() {
			if err != nil {
				adoptOrphans(v.Value.Ctx(), order)
			}
		}()
	}
	return tensor.Try(func() {
		c.WithScope(func() {
			c.WithRole(gradRole, func() {
				if grad == nil {
					v.pending = c.Full(v.Value.Device(), v.Value.DType(), 1, v.Value.Shape()...)
				} else {
					v.pending = c.Adopt(grad.Alias())
				}
				for i := len(order) - 1; i >= 0; i-- {
					if p.capture != nil && !p.capture.runs(order[i]) {
						continue // leads to no var of Grad's
					}
					n := order[i].node
					p.step(order[i], order[i] == v)
					hooks.stepped(n)
				}
				if p.capture != nil && !p.retain {
					// The graph is gone, as after Backward (and as PyTorch
					// frees it): what Grad did not need to run releases
					// what it holds now, not when its scope closes.
					for _, u := range order {
						if u.node != nil {
							consumeNode(u, u == v)
						}
					}
				}
			})
		})
	})
}

// adoptOrphans hands the orphans among what the graph's backward
// functions read (values of ops on kept tensors alone that no op of the
// forward pass combined with a context's data, see tensor.Ctx) to the
// scope open now in c, root's context, as the forward's next op over them
// would have: before a pass that keeps the graph (RetainGraph), where
// otherwise the first backward op that combines one with a gradient
// adopts it into the pass's own scope, which releases it as the pass
// ends, and the next pass over the graph reads it released; and after a
// pass that failed, for the nodes it did not step, which no scope would
// release.
func adoptOrphans(c *tensor.Ctx, order []*Var) {
	for _, u := range order {
		if u.node == nil {
			continue // stepped and consumed by a pass that failed later
		}
		c.AdoptOrphan(u.Value)
		for _, w := range u.node.watch {
			c.AdoptOrphan(w.t)
		}
		for _, t := range u.node.saved {
			c.AdoptOrphan(t)
		}
	}
}

// dropPending forgets the gradients a failed pass left pending on the
// vars it did not step (the pass's scope released them), so that a later
// pass through those vars starts from none. After a pass that completed
// there are none.
func dropPending(order []*Var) {
	for _, u := range order {
		u.pending, u.slices = nil, nil
	}
}

// topo returns the vars with nodes reachable from root, inputs before
// the vars computed from them; or an error wrapping ErrNoGraph when one of
// their inputs had its graph consumed by an earlier Backward.
func topo(root *Var) ([]*Var, error) {
	var order []*Var
	seen := map[*Var]bool{}
	type frame struct {
		v    *Var
		next int
	}
	stack := []frame{{v: root}}
	seen[root] = true
	for len(stack) > 0 {
		f := &stack[len(stack)-1]
		if f.next < len(f.v.node.inputs) {
			in := f.v.node.inputs[f.next]
			f.next++
			if in != nil && in.consumed {
				return nil, fmt.Errorf("%w: %s, an input of %s, was consumed by an earlier Backward (Detach a retained var to use it as a leaf)", ErrNoGraph, in, f.v.Name())
			}
			if in != nil && in.node != nil && !seen[in] {
				seen[in] = true
				stack = append(stack, frame{v: in})
			}
			continue
		}
		order = append(order, f.v)
		stack = stack[:len(stack)-1]
	}
	return order, nil
}

// pass is how a backward pass runs: with the gradients checked for NaNs
// and infinities (anomaly, DetectAnomalyIn), keeping the graph (retain,
// BackwardOptions.RetainGraph), handing gradients to Grad's caller
// instead of leaves (capture, grad.go).
type pass struct {
	anomaly, retain bool
	capture         *capture
	// hooks is the pass counting hooked leaves that this one reports to
	// (itself, or the one it is nested in): a region node's inner pass,
	// which may run in another context, reports to it too.
	hooks *gradPass
}

// step runs one node's backward and hands the gradients to its inputs,
// then releases what the node kept and its output value, unless the pass
// retains the graph.
func (p pass) step(v *Var, isRoot bool) {
	n := v.node
	completeSlices(v)
	g := v.pending
	v.pending = nil
	if g != nil {
		if dt := v.Value.DType(); g.DType() != dt && !n.takes(g.DType()) {
			g = retype(g, dt)
		}
		p.capture.take(v, g) // a var of Grad's: its gradient is complete
		if p.capture != nil && !p.capture.needed[v] {
			g.Release() // its backward leads to no other var of Grad's: not run
			return
		}
		if n.narrow == nil || !depositNarrow(n, g) { // a Narrow writes g into its input's pending gradient
			checkVersions(n)
			if n.region {
				n.grad = p.capture // the pass RegionGrad continues
				n.hooks = p.hooks  // the pass the region's inner pass reports to
			}
			grads := n.backward(g)
			n.grad, n.hooks = nil, nil
			ownGrads(v, g, grads)
			checkGrads(n, g, grads)
			if p.anomaly {
				checkNaN(n, g, grads)
			}
			for i := 1; i < len(grads); i++ {
				if grads[i] != nil && slices.Contains(grads[:i], grads[i]) {
					// One tensor for two inputs: each gets a view of its
					// own, so that no leaf keeps it as its Grad (keepGrad)
					// while another input still holds it.
					grads[i] = grads[i].Alias()
				}
			}
			for i, in := range n.inputs {
				if in != nil && in.requiresGrad && grads[i] != nil {
					if p.capture != nil && !p.capture.wants(in, grads[i]) {
						continue
					}
					accumulate(n.op, in, grads[i])
				}
			}
			for _, gi := range grads {
				if gi != g { // g itself handed on (an identity's backward) is released below
					gi.Release()
				}
			}
		}
		if v.retain && p.capture == nil { // Grad fills no Grad
			keepGrad(v, g)
		}
		g.Release()
	}
	if !p.retain {
		consumeNode(v, isRoot)
	}
}

// consumeNode releases what v's node kept and v's value (but the root's
// and a retained var's), and marks v consumed: its graph is gone.
func consumeNode(v *Var, isRoot bool) {
	for _, s := range v.node.saved {
		s.Release()
	}
	v.node, v.consumed = nil, true
	if !isRoot && !v.retain {
		v.Value.Release()
	}
}

// ownGrads replaces each gradient in grads that v's node holds (an
// input's value, v's value, a saved tensor: a custom backward may return
// what it saved, as PyTorch's Function.backward may) with a view of its
// own, so that releasing the results releases the view, not the tensor.
// g, handed on as it is, is released by step.
func ownGrads(v *Var, g *tensor.Tensor, grads []*tensor.Tensor) {
	n := v.node
	for i, gi := range grads {
		if gi == nil || gi == g || gi.Released() {
			continue
		}
		held := gi == v.Value || slices.Contains(n.saved, gi)
		for _, in := range n.inputs {
			held = held || in != nil && in.Value == gi
		}
		if held {
			grads[i] = gi.Alias()
		}
	}
}

// checkGrads checks what n's backward returned for g before any of it is
// handed on: one gradient per input, each (where it is used) live, of its
// input's shape, a float dtype and its input's device. A backward written
// by a user (Record) that gets this wrong fails the pass with an
// *tensor.OpError naming the op, as a failing op would: its node is not
// stepped, so its inputs receive none of its gradients, and the returned
// tensors (the engine's) are released.
func checkGrads(n *node, g *tensor.Tensor, grads []*tensor.Tensor) {
	var err *tensor.OpError
	if len(grads) != len(n.inputs) {
		err = &tensor.OpError{Op: "autograd.Backward", Err: tensor.ErrArgument,
			Msg: fmt.Sprintf("backward of %s returned %d gradients for its %d inputs", n.op, len(grads), len(n.inputs))}
	} else {
		for i, in := range n.inputs {
			if in != nil && in.requiresGrad && grads[i] != nil {
				if err = gradProblem(n.op, i, in, grads[i]); err != nil {
					break
				}
			}
		}
	}
	if err == nil {
		return
	}
	for _, gi := range grads {
		if gi != g {
			gi.Release()
		}
	}
	panic(err)
}

// gradProblem is the error of gradient g that op's backward gave for its
// input i (i < 0: not known), or nil when g fits in.
func gradProblem(op string, i int, in *Var, g *tensor.Tensor) *tensor.OpError {
	what := fmt.Sprintf("backward of %s gave", op)
	input := fmt.Sprintf("input %s", in)
	if i >= 0 {
		input = fmt.Sprintf("input %d, %s", i, in)
	}
	switch {
	case g.Released():
		return &tensor.OpError{Op: "autograd.Backward", Err: tensor.ErrReleased,
			Msg: fmt.Sprintf("%s a released gradient for %s", what, input)}
	case !slices.Equal(g.Shape(), in.Value.Shape()):
		return &tensor.OpError{Op: "autograd.Backward", Err: tensor.ErrShape,
			Msg: fmt.Sprintf("%s a gradient of shape %v for %s: want its shape", what, g.Shape(), input)}
	case !g.DType().IsFloat():
		return &tensor.OpError{Op: "autograd.Backward", Err: tensor.ErrDType,
			Msg: fmt.Sprintf("%s a gradient of dtype %v for %s: want a floating-point one", what, g.DType(), input)}
	case g.Device() != in.Value.Device():
		return &tensor.OpError{Op: "autograd.Backward", Err: tensor.ErrDevice,
			Msg: fmt.Sprintf("%s a gradient on %v for %s on %v", what, g.Device(), input, in.Value.Device())}
	}
	return nil
}

// accumulate adds gradient g (owned by the caller) to input in. A float
// gradient in another dtype than in's value (a half gradient of a float32
// value, see takesHalfGrad; a float32 one of a half value, LayerNormHalf)
// is kept as it came while it is in's only one. Sums are taken in the
// value's dtype, in float32 for a half value (step then gives in's
// backward the dtype it takes), and a leaf's Grad is in its value's
// dtype.
func accumulate(op string, in *Var, g *tensor.Tensor) {
	if err := gradProblem(op, -1, in, g); err != nil {
		panic(err)
	}
	if in.node == nil { // a leaf: the gradient outlives this backward pass
		keepGrad(in, g)
		return
	}
	if in.pending == nil {
		in.pending = g.Alias()
		return
	}
	completeSlices(in)
	dt := in.Value.DType()
	if dt.IsHalf() {
		dt = tensor.Float32
	}
	in.pending = retype(in.pending, dt)
	g, done := inDType(g, dt)
	defer done()
	sum := tensor.Add(in.pending, g)
	in.pending.Release()
	in.pending = sum
}

// keepGrad adds g into v.Grad, which is kept out of every scope, in v's
// GradDType (its value's dtype unless SetGradDType chose a half one). A
// first gradient that is its storage's only tensor (what most backward
// functions return) becomes the Grad as it is: its caller only releases
// it, and a copy would briefly double it (gpt2-medium's vocabulary table:
// 196 MiB at the head's backward, while every checkpointed input is still
// held). A half Grad takes a second gradient through float32: the sum
// rounded once to the half dtype.
func keepGrad(v *Var, g *tensor.Tensor) {
	dt := v.GradDType()
	g, done := inDType(g, dt)
	defer done()
	if v.Grad == nil {
		if g.Sole() || v.regionIn {
			v.Grad = g.Alias()
		} else {
			v.Grad = g.Clone()
		}
		tensor.Keep(v.Grad)
		return
	}
	if v.regionIn && !v.Grad.Sole() { // before a half Grad is written in place too
		v.Grad = regionSum(v.Grad, g)
		return
	}
	addGrad(v.Grad, g)
}

// addGrad adds g, of sum's dtype, into the gradient sum in place; a half
// sum takes it through float32 (arithmetic runs in float32 and float64),
// the sum rounded once to the half dtype.
func addGrad(sum, g *tensor.Tensor) {
	if !sum.DType().IsHalf() {
		sum.AddInPlace(g)
		return
	}
	wide := sum.To(tensor.Float32)
	defer wide.Release()
	wg := g.To(tensor.Float32)
	defer wg.Release()
	wide.AddInPlace(wg)
	sum.CopyFrom(wide)
}

// regionSum returns sum + g, a new kept tensor, and releases sum: the
// gradient of a region's input (Var.regionIn) that its first gradient
// was a view of (a transpose's, say), shared with what made it: not
// written in place, summed as accumulate sums a pending gradient (a
// half one through float32, rounded once).
func regionSum(sum, g *tensor.Tensor) *tensor.Tensor {
	var s *tensor.Tensor
	if sum.DType().IsHalf() {
		s = sum.Clone() // of its own, then summed as keepGrad sums a half Grad
		addGrad(s, g)
	} else {
		s = tensor.Add(sum, g)
	}
	tensor.Keep(s)
	sum.Release()
	return s
}

// takesHalfGrad marks v, the output of an op whose backward multiplies
// its output gradient in products of the half dtype dt (Linear, GeluLinear
// and MatMul under autocast), as taking that gradient in dt too: an op
// below it that computes the gradient in dt (the fused attention's,
// written by its kernels in dt) or rounds it to dt in the kernel that
// computes it (GeluLinear's GELU gradient) hands it over as it is, where
// the engine would otherwise widen it to float32 for the products to cast
// it back. The products' results are the same bits either way. v is
// returned; nothing changes outside autocast or for a v that is not
// float32.
func takesHalfGrad(v *Var, pr precision) *Var {
	if v.node != nil && pr.st.Enabled && pr.st.DType.IsHalf() && v.Value.DType() == tensor.Float32 {
		v.node.alsoTakes |= 1 << pr.st.DType
	}
	return v
}

// wantsHalfGrad reports whether in's gradient may be handed over in the
// half dtype dt: in is computed by an op that takes it (takesHalfGrad).
func wantsHalfGrad(in *Var, dt tensor.DType) bool {
	return in.node != nil && dt.IsHalf() && in.node.takes(dt)
}
