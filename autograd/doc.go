// Package autograd is reverse-mode automatic differentiation over package
// tensor, define-by-run like PyTorch.
//
// A Var wraps a tensor. Leaves are made with Param (requires a gradient)
// or Const. Every op here computes its forward with tensor ops and calls
// Record with its backward function written right beside it (micrograd's
// style); users write custom ops the same way. Under NoGrad (NoGradIn for
// an explicit context) nothing is recorded.
//
// Backward walks the graph once in reverse topological order. Gradients
// of leaves accumulate into Var.Grad, which lives outside every scope
// until ZeroGrad, in the leaf's value dtype or, set by Var.SetGradDType,
// in bf16 or fp16 for a float32 leaf (each gradient rounded once: half
// the memory, as llm.c keeps its gradients); everything else backward
// allocates has memory role gradient. An embedding whose table already
// has a Grad (a tied vocabulary table: the output head's gradient came
// first) adds its rows into that Grad in place
// (tensor.EmbeddingBackwardInto) instead of handing the engine a
// (rows, D) gradient to add (not in a Grad pass, which changes no Grad,
// nor into a half Grad, which the engine adds to through float32, rounded
// once).
// Ops that take bf16 or fp16 operands outside autocast (Linear,
// GeluLinear, MatMul, Embedding, the fused head and attention) compute
// their gradients in float32 and return each in its operand's dtype; the
// elementwise ops, reductions, softmax and LayerNorm refuse half values
// at forward (tensor.ErrDType). The graph is consumed as it goes: after a
// node's backward has run, its saved tensors, its output gradient and its
// output value are released (unless the var was retained), so memory
// falls during the backward pass. BackwardOpts with RetainGraph keeps the
// graph for another pass instead (torch's retain_graph=True). Grad
// returns the gradients with respect to chosen vars, leaves or computed
// ones, without touching any leaf's Grad (torch.autograd.grad): only the
// ops between the output and those vars run their backward, checkpointed
// regions included (RegionGrad). Forward values stay alive only until the
// backward of the op that produced them; what no backward reaches is
// released by the enclosing tensor.Scope. With one scope per training
// step, the bytes in use after every step equal those after the first.
//
// In-place writes are checked as in PyTorch: every storage counts the
// writes made to it in place (tensor.Tensor.Version: Fill, CopyFrom,
// AddInPlace, an optimizer step, MarkModified...), a node records the
// versions of what its backward reads (its saved tensors, and the inputs
// or output its backward uses: Mul keeps b for a's gradient only when a
// needs one, Exp its output, Add nothing; a user's Record every input and
// saved tensor), and Backward fails with ErrModified, naming the op and
// the tensor, before running a backward whose operands changed since the
// forward, where it would give the gradient at values the forward never
// saw. Embedding and CrossEntropy keep their own reference to the ids and
// targets, so the caller may release or reuse them after the forward: a
// reuse written in place is caught the same way.
//
// Anomaly detection (DetectAnomalyIn, torch.autograd.detect_anomaly) is
// for finding where a NaN comes from: ops recorded inside it keep the
// frames that called them, and a Backward run inside it checks each
// gradient a backward returns (tensor.HasNaN), failing with ErrNaN at the
// first op whose gradient holds a NaN, named with its recording's frames
// (infinities pass, as in PyTorch).
//
// The gradient through Narrow pieces of a computed var (the attention's
// q/k/v split) is assembled in place: each piece's gradient is written
// into the var's pending gradient and freed, instead of a zero-padded
// copy of the whole var per piece summed (narrow.go).
//
// Memory-minded ops: CrossEntropy recomputes the softmax in backward
// instead of keeping the (N, V) probabilities; CausalAttention keeps only
// q, k and v and recomputes the (B, H, T, T) probabilities in backward, as
// fused attention kernels do, with the causal mask fused into the softmax
// (CausalSoftmax); GeluLinear (the MLP's second half) keeps the
// GELU input and recomputes its output (GeluLinearKept keeps the output
// too, one GELU pass less: nn's MLP when nothing is checkpointed);
// Dropout regenerates its mask from
// (seed, offset) instead of storing it. Var.Drop lets model code free an
// intermediate that no backward reads (the qkv projection once it has
// been split into heads) while gradients still flow through it. With
// these, the GPT's plain attention peaks below PyTorch's fused SDPA.
//
// FusedCausalAttention is the same function as CausalAttention, with the
// same dropout mask, computed by fused kernels (FlashAttention-2, see
// tensor.FusedCausalAttention): no (B, H, T, T) matrix exists even inside
// the op; it keeps its output and the per-row log-sum-exp, and backward
// recomputes the probabilities tile by tile. FusedCausalAttentionQKV is
// the same over the heads of one (B, T, 3C) q/k/v product, in place: its
// output is (B, T, C) and its gradient (B, T, 3C), so a transformer's
// head split and merge copies disappear (on CUDA even inside the op), and
// under autocast the product is cast once and that copy is all it keeps.
// nn's attention uses it when asked (nn.AttentionFused; train-gpt's
// default on CUDA wherever its kernels run on tensor cores: fp16, bf16,
// tf32, and fp32 at heads of up to 64; nn.AutoAttention). On the H200 its tensor-core kernels make a bf16 gpt2 step 1.41x
// faster than plain attention
// (bench/results/gpu-call2-2026-12-02-s7-summary.txt); nn's default stays plain,
// which every device and dtype runs at the same speed as before.
//
// Linear adds its bias in the product (tensor.MatMulBias) and takes its
// weight and bias gradients from one product (tensor.MatMulRowSums): on a
// GPU the bias add and the bias gradient run in the GEMM's epilogue.
// GeluLinear writes its GELU in the products' dtype under autocast
// (tensor.UnaryTo). Under autocast, Linear and GeluLinear save the
// region's cast of a kept weight for backward (precision.weightCopy), as
// PyTorch's autocast saves its cast weights, so backward's product with
// the output gradient does not cast the weight again; not under an op
// hook (checkpointing), where memory comes first. LinearCrossEntropy
// sums its weight gradient over the chunks in the GEMM (beta 1,
// tensor.MatMulInto) and writes each chunk's input gradient straight
// into its rows.
//
// # Half precision where the consumer takes it
//
// Under autocast a product's result is float32 (package amp), except
// where its only consumer takes it in the half type anyway: LinearHalf
// (the q/k/v product the fused attention reads, the MLP's hidden product
// the GELU reads widened) and LinearCrossEntropy's logits are made half,
// as PyTorch's autocast makes them; LayerNormHalf writes a norm that feeds
// only products in the half type, the same bits the products' cast gives.
// Gradients follow the same rule (half gradients): a node may take its
// output gradient in a dtype besides its value's (node.alsoTakes). Linear,
// GeluLinear and MatMul under autocast take it half, because their
// products would cast it there; so the fused attention's q/k/v gradient
// (written half by its kernels) and GeluLinear's GELU gradient (rounded
// half by the kernel that computes it, tensor.UnaryBackwardTo) reach the
// Linear below as they are, where the engine would otherwise widen them
// to float32 for the Linear to cast back: the same bits, two passes less.
// LayerNormHalf's node takes float32 (its products' gradient). A gradient
// is widened to the value's dtype for any other backward, for a sum of
// two (taken in float32 for a half value) and for a leaf's Grad.
//
// LinearCrossEntropy is a language model's output head and loss fused and
// chunked: a chunk of rows' logits, their loss and their gradient are made
// in the forward and multiplied into the gradients of the hidden states
// and the weight at once, so the (N, V) logits and their gradient (3.2 GB
// in float32 for GPT-2 at batch 8 by 1024) are never held; backward only
// scales the two gradients it kept (nn.HeadLoss). On CUDA, when its
// products run on tensor cores, it pads the vocabulary to a multiple of 64
// (HeadPadding: GPT-2's 50,257 to 50,304, as nanoGPT and llm.c do) so
// cuBLAS gets aligned rows; the padded columns never enter the loss.
//
// # State: tensor.Ctx, carried by the values
//
// Go has no goroutine-local storage, so the state an op needs (which
// scope owns its output, the memory role, whether to record the graph,
// the autocast state, the position of the random stream) lives in a
// value the caller holds: a tensor.Ctx, one per goroutine. It is not
// passed to every op. Every tensor records the Ctx it was made in, and an
// op takes the Ctx of its operands (tensor.CtxOf), as GoMLX's ops take
// their Graph from their operands and database/sql's statements their
// transaction from the *Tx they are called on. So only the entries name
// it: inputs are made with its methods (c.FromInt32s), a step runs in
// c.WithScope, evaluation in NoGradIn(c, fn), mixed precision in
// amp.Autocast(c, ...); the model's Forward is unchanged. Each package
// above tensor keeps its state in its own slot of the Ctx (tensor.CtxKey):
// autograd the grad mode and the random stream (RandomOffset), amp the
// autocast region, checkpoint its recomputation.
//
// What may be shared: parameters and other kept tensors belong to no Ctx,
// so goroutines may read one model at the same time (inference, or
// evaluation beside training once the optimizer is not writing); modules
// hold no mutable state (Dropout draws from the Ctx's stream). What may
// not: training one model's parameters from two goroutines (their
// gradients and the optimizer's writes race, as any Go value would), and
// one Ctx used by two goroutines at once (its scopes nest in program
// order; in Background this is reported as an *tensor.OpError wrapping
// ErrArgument). Combining tensors of two Ctx values in one op panics with
// tensor.ErrArgument. The package-level conveniences (NoGrad,
// tensor.WithScope, tensor.Zeros, ...) use tensor.Background(), the
// process's default Ctx, for programs that do their tensor work on one
// goroutine; an op on parameters alone falls back to it too, and its
// result joins the caller's Ctx at the next op that meets the caller's
// tensors. Such an op takes Background's autocast state and op hook only
// on the goroutine whose scope is Background's innermost (where its
// result goes): on a goroutine working in a Ctx of its own it runs in
// float32 and unhooked, whatever region another goroutine runs in
// Background.
//
// Recomputation (package checkpoint builds on these): Var.BackwardWith
// back-propagates a given gradient from a var of any shape, as
// torch.autograd.backward(y, grad); RecordRegion makes the output of a
// region that differentiates itself in backward (its node requires a
// gradient even when its inputs do not, and its backward runs with
// recording on), and RegionGrad runs the region's inner pass as part of
// the pass that steps it (a Backward fills the Grad of the leaves inside,
// a Grad takes their gradients as its results); NodeMark and Var.Outer
// find the computed vars a region closed over, and AsLeaves lets them
// stand as leaves while it is recomputed; Var.TakesGradLike lets a
// region's node take its gradient in the dtypes its recomputed output
// takes it in, and Var.AlsoReads reports what a region checks before it
// recomputes to a region around it (Var.Reads); and an OpHook, set per
// context with WithOpHook, is
// consulted by name by the forward of the matrix products, the attention,
// LayerNorm, the softmaxes and GeluLinear's GELU, which lets selective
// checkpointing keep some outputs and hand them back in the
// recomputation.
//
// Gradient-ready hooks (Var.SetGradHook, PyTorch's post-accumulate-grad
// hooks): a leaf's hook runs once per backward pass, as soon as the last
// node of the graph using the leaf has run, so its Grad is final for the
// pass; package dist starts reducing a bucket of gradients there while
// backward goes on. The engine counts each hooked leaf's uses when the
// pass starts and reports it when the count is spent; leaves reached
// only inside regions (checkpointing) wait for the last region node
// (gradhook.go). Without hooks the cost is one atomic load a pass.
//
// GradCheck compares analytic gradients with central finite differences
// in float64; the tests run it on every op, and compare ops and gradients
// with PyTorch's golden values (tools/golden).
package autograd
