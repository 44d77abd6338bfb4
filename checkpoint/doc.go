// Package checkpoint is activation checkpointing: a function over
// autograd values whose intermediates are not kept for backward but
// recomputed when backward reaches it, trading arithmetic for memory.
//
// # Use
//
//	y := checkpoint.Apply(func(in ...*autograd.Var) *autograd.Var {
//		return block.Forward(in[0])
//	}, x)
//
// y is what block.Forward(x) would return, gradients reach x and every
// parameter the block uses, and the results are bit for bit those of the
// plain call (with the exceptions "When gradients are bit for bit" names).
// Sequential checkpoints every k-th of a list of layers;
// Options{Policy: SaveMatMuls} keeps the outputs of the matrix products
// and recomputes the rest (selective checkpointing). nn.GPT's Checkpoint
// field picks one of these for its blocks.
//
// # The forward pass
//
// Apply runs fn in a scope of its own in the inputs' context (tensor.Ctx)
// and closes it as fn returns: every intermediate is freed then, not
// after backward. What survives is the result's value, which moves to the
// caller's scope, and the inputs, which the caller holds anyway. fn runs
// with recording on, as it would without checkpointing: the result then
// knows whether anything in the region needs a gradient. Under NoGrad
// (PyTorch's reentrant checkpoint) a region whose inputs need no gradient
// could not tell that its parameters do, and would give them none; and
// Var.Drop, with which model code frees intermediates early (the GPT's
// qkv projection), does nothing there, so the region's own peak would be
// higher. The graph fn records is dropped with the scope; the region's
// result gets one node of its own (autograd.RecordRegion) whose inputs are
// the region's inputs, and after them the vars computed outside the
// region (with graphs of their own) that fn closed over, a table or mask
// made once for every block (autograd.Var.Outer, by the order in which
// nodes were recorded: autograd.NodeMark): in the recomputation those
// stand as leaves (autograd.AsLeaves), so that the inner pass stops at
// them and their gradients reach the outer graph through the node, as in
// the plain graph. The node lists them in the order the plain graph's
// backward walk from fn's result reaches them (autograd.Var.FirstReached),
// and an input that walk does not reach (read by a side computation only)
// as a constant over a view of its value, which the node keeps: the
// backward pass then steps the ops outside the region in the plain
// graph's order. Before fn runs, Apply notes the context's random
// stream (autograd.RandomState) and autocast state (amp.Current). Under
// autocast fn runs in an autocast region of its own (amp.With), so that
// the low-precision copies of the weights it casts are freed as it
// returns: the recomputation casts its own, and the enclosing region's
// cache would otherwise hold every checkpointed block's copies until the
// whole forward pass ends (PyTorch's autocast cache does: 576 MiB of
// gpt2-medium's bf16 weight copies at the forward pass's peak).
//
// Under NoGradIn there is nothing to save, and Apply is fn itself. A
// region whose result needs no gradient, or whose fn returns an input, a
// computed var it closed over or nil, returns fn's result with nothing
// recorded.
//
// # The backward pass
//
// The engine calls the region's node when the gradient of its result is
// complete, as for any op: recomputation happens only then, and only for
// regions that backward reaches. The node's backward
//
//  1. checks that nothing the recomputation reads was written in place
//     since the forward pass: the region's inputs (as for any op, see
//     autograd.Record) and the parameters and constants fn closed over
//     (the leaves its graph reached, autograd.Var.Leaves, whose versions
//     the forward noted): an optimizer step between the passes would make
//     the recomputation differ from the forward in silence, so Backward
//     fails with autograd.ErrModified instead;
//  2. moves the random stream back to where the forward pass found it
//     (dropout masks are functions of the stream's position, so they come
//     out the same) and enters the forward's autocast state (amp.With);
//  3. runs fn again, in a scope of its own, on detached copies of the
//     inputs (leaves that require a gradient where the inputs did), with
//     recording on whatever the grad mode around Backward, and puts the
//     stream and the autocast state back;
//  4. checks that the recomputation repeated the forward pass (the
//     result's shape and dtype, the random numbers drawn, the ops a
//     policy saved) and panics with an error naming the difference when
//     not: a function that is not deterministic would silently give
//     wrong gradients;
//  5. back-propagates the result's gradient through the recomputed graph
//     (autograd.RegionGrad), outside the autocast state as the plain
//     graph's backward would run: in a Backward pass parameters inside
//     accumulate their gradients into Grad there, as they would in the
//     plain graph (torch.autograd.backward(y, grad)); in an autograd.Grad
//     pass through the region no Grad changes and Grad's leaves used
//     inside get their gradients in its results; either way the detached
//     inputs' gradients are returned to the engine, which carries on
//     upstream of the region.
//
// The recomputed activations have memory role activation; they are freed
// as the inner backward consumes them and by the scope at the end. This
// is PyTorch's non-reentrant checkpoint (use_reentrant=False) in effect:
// every input and parameter gets its gradient, regions nest (an inner
// region recomputes inside the outer's recomputation), autograd.Grad
// differentiates through them (as torch.autograd.grad through a
// non-reentrant checkpoint; the reentrant one refuses), and nothing else
// changes for the caller: the random stream ends where the plain run
// leaves it and the result is the same value.
//
// # When gradients are bit for bit
//
// The region's node hands each input one gradient: the sum of its uses
// in fn, added in the plain graph's order (an input passed twice,
// Apply(fn, x, x), is one leaf in the recomputation, as it is one var in
// the plain graph). The plain graph instead adds those uses one at a time
// among the input's other gradients. So every gradient is the plain
// run's bit for bit when each input that needs a gradient takes
// gradients from this region only: a value the graph computed, or a leaf
// whose Grad is empty and of its value's dtype. An input also used
// outside the region or by another region, or a leaf that already holds
// a gradient, gets the same sum grouped otherwise, and it (and whatever
// is upstream of it) can differ in the last bits, float addition not
// being associative. Parameters fn uses accumulate into Grad in the
// recomputation in the plain graph's order; one that also takes
// gradients from outside the region in the same backward pass can get
// them in another order, with the same effect. nn.GPT's blocks are of
// the first kind: each block's input goes to its region alone.
//
// # Selective checkpointing
//
// A Policy says per op, by name and outputs, whether to keep them (MustSave) or
// recompute it (PreferRecompute), as the policy function of PyTorch's
// selective activation checkpointing does. It works through a hook that
// autograd's ops consult by name (autograd.OpHook): the matrix products
// (MatMul, Linear, GeluLinear's product), its GELU, CausalAttention,
// LayerNorm and the softmaxes. In the forward pass the region's recorder
// is the context's hook: it lists the ops in the order they run and keeps
// an alias of each output the policy saves (moved to the caller's scope
// with the result, so a step that never runs backward still frees it). In
// the recomputation the same recorder hands the saved outputs back, and
// the ops return them instead of computing (an op nested inside a saved
// one, like GeluLinear's GELU, then does not run at all); everything else
// is recomputed. The saved outputs are released after the region's
// backward. SaveMatMuls is the usual policy: the products are most of a
// block's arithmetic, the norms and element-wise ops little.
// SaveMatMulsUpTo(n) keeps only the products with outputs up to n bytes:
// a GEMM whose output is wide for its cost (the MLP's 4x expansion) is
// cheaper to redo than to hold.
//
// # Memory
//
// Per transformer block of the GPT (one unit U is a (B, T, C) activation)
// the plain model keeps about 14 U for backward (nn.GPT with no
// checkpointing 18 U: it also keeps the GELU output, 4 U, rather than
// recompute it; the blocks CheckpointBlocks with Every > 1 leaves
// unchecked keep 14 U, recomputing it); checkpointing every
// block keeps 1 U (its output, the next block's input) and rebuilds one
// block's 14 U at a time in backward; SaveMatMuls keeps 11 U (the c_attn
// output, the attention output, both projections and c_fc's output),
// SaveMatMulsUpTo(3 U) 7 U (c_fc's output recomputed); nn.GPT's
// selective default is SaveMatMulsUpToElements (3 U's elements), so that
// under autocast, where c_fc writes the half type, its output is still
// the one recomputed. The nn tests check these amounts against the memory
// statistics by role.
//
// # Offload
//
// Options.Offload (an *Offload shared by a model's regions) moves what
// the regions hold between the passes, the outputs their policy saves and
// their inputs of memory role activation, to mapped pinned host memory
// (tensor.MoveTo: copies on the GPU's copy stream while the device's
// stream computes), the region Keep places back once a region's forward
// pass ends, so that the last Keep regions stay; when backward reaches a
// region, its tensors come back if they are away and the Ahead regions
// before it start coming back, their copies running under this region's
// recomputation (also a region whose result the model dropped, Var.Drop);
// a region backward never reaches brings what it moved out and is still
// live (an input that outlives the pass) back to the device when its
// context's next region ends its forward pass. With SaveMatMuls the
// device then holds about Keep + Ahead regions' products and recomputes
// only the cheap ops: on the H200, float32 gpt2 (B8 T1024) ran at 0.98x
// the speed of no checkpointing with 0.36x its device memory (session
// 16), where selective checkpointing on the device ran 0.93x at 0.56x. Results are bit for bit those without it;
// a device that cannot take a tensor back leaves it in host memory, where
// the ops read it over the bus. Offload.Regions reports a forward pass's
// regions and the most bytes one held, to choose Keep by: one context's
// pass, never those of contexts sharing the Offload counted as one.
//
// # Contexts
//
// All state a region touches is its context's: the scope stack, the
// random stream, the autocast state and the op hook. Goroutines with
// their own contexts checkpoint independently.
//
// A region's context is its inputs' (tensor.CtxOf), not the caller's:
// Apply takes no context. When every input is a kept tensor (a
// parameter, a value made with tensor.Keep or NewKept) or nil, the
// region's context is tensor.Background(), even when the caller works in
// a context of its own. Apply then notes and replays Background's random
// stream, and a function that draws randomness from the caller's own
// context (a closure over it calling autograd.RandomOffset(c, n)) draws
// fresh numbers when backward recomputes it: other masks than the
// forward pass used, and wrong gradients, which the replay check cannot
// see (it watches the region's stream, from which nothing was drawn). Have fn draw from its inputs' context
// (tensor.CtxOf of their values, which is the region's), or make sure an
// input belongs to the caller's context (pass a value computed in it,
// rather than a kept one), so that the region runs in that context and
// replays its stream. Such regions of goroutines working in contexts of
// their own run one at a time (tensor.WithBackground: each holds
// Background through its forward pass, and through its recomputation and
// backward), and an op over kept tensors alone of another goroutine does
// not see a region's op hook or autocast state there; a goroutine's
// region over kept tensors waits while another's runs.
package checkpoint
