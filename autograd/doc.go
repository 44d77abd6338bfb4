// Package autograd is reverse-mode automatic differentiation over package
// tensor, define-by-run like PyTorch.
//
// A Var wraps a tensor. Leaves are made with Param (requires a gradient)
// or Const. Every op here computes its forward with tensor ops and calls
// Record with its backward function written right beside it (micrograd's
// style); users write custom ops the same way. Under NoGrad nothing is
// recorded.
//
// Backward walks the graph once in reverse topological order. Gradients
// of leaves accumulate into Var.Grad, which lives outside every scope
// until ZeroGrad; everything else backward allocates has memory role
// gradient. The graph is consumed as it goes: after a node's backward has
// run, its saved tensors, its output gradient and its output value are
// released (unless the var was retained), so memory falls during the
// backward pass. Forward values stay alive only until the backward of the
// op that produced them; what no backward reaches is released by the
// enclosing tensor.Scope. With one scope per training step, the bytes in
// use after every step equal those after the first.
//
// Memory-minded ops: CrossEntropy recomputes the softmax in backward
// instead of keeping the (N, V) probabilities; CausalAttention keeps only
// q, k and v and recomputes the (B, H, T, T) probabilities in backward, as
// fused attention kernels do, with the causal mask fused into the softmax
// (CausalSoftmax); GeluLinear (the MLP's second half) keeps the
// GELU input and recomputes its output; Dropout regenerates its mask from
// (seed, offset) instead of storing it. Var.Drop lets model code free an
// intermediate that no backward reads (the qkv projection once it has
// been split into heads) while gradients still flow through it. With
// these, the GPT's plain attention peaks below PyTorch's fused SDPA.
//
// GradCheck compares analytic gradients with central finite differences
// in float64; the tests run it on every op, and compare ops and gradients
// with PyTorch's golden values (tools/golden).
package autograd
