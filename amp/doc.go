// Package amp is automatic mixed precision: autocast regions, the cast
// cache of their weights, and the gradient scaler.
//
// # Regions are functions, and live in the caller's context
//
// The autocast state lives in the caller's tensor.Ctx (one slot, like
// autograd's grad mode), not in a process global: each goroutine's
// context has its own, and an autocast region is a function run inside
// it (Autocast(c, tensor.BFloat16, fn)), which nests and restores the
// previous state also on a panic. A function-scoped region reads as Go's
// other scoped state (a held lock, a transaction) and cannot be left open
// by a forgotten exit call, where an explicit Enter/Exit pair (PyTorch's
// context manager) could. Current reads the state; With re-enters a saved
// one, which activation checkpointing uses to recompute a region in the
// precision its forward pass ran in.
//
// # The precision policy
//
// PyTorch's CUDA autocast (torch.amp, "CUDA Ops that can autocast to
// float16") lists, in part:
//
//	float16: __matmul__, addbmm, addmm, addmv, addr, baddbmm, bmm,
//	  chain_matmul, multi_dot, conv*, GRUCell, linear, LSTMCell, matmul,
//	  mm, mv, prelu, RNNCell
//	float32: __pow__, __rdiv__, __rpow__, __rtruediv__, acos, asin,
//	  binary_cross_entropy_with_logits, cosh, cosine_embedding_loss, cdist,
//	  cosine_similarity, cross_entropy, cumprod, cumsum, dist, erfinv, exp,
//	  expm1, group_norm, hinge_embedding_loss, kl_div, l1_loss, layer_norm,
//	  log, log_softmax, log10, log1p, log2, margin_ranking_loss, mse_loss,
//	  multilabel_margin_loss, multi_margin_loss, nll_loss, norm,
//	  normalize, pdist, poisson_nll_loss, pow, prod, reciprocal, rsqrt,
//	  sinh, smooth_l1_loss, soft_margin_loss, softmax, softmin, softplus,
//	  sum, renorm, tan, triplet_margin_loss
//	promote to the widest input type: addcdiv, addcmul, atan2, bilinear,
//	  cross, dot, grid_sample, index_put, scatter_add, tensordot
//
// strata follows the same split. Every matrix product of package autograd
// (MatMul, Linear, GeluLinear, both products of the attention, and every
// product of their backward passes) runs in the region's dtype: its
// float32 operands are cast (Cast), weights once per region
// (PyTorch's autocast weight cache: a kept tensor's copy is made at its
// first use in the region and released when the region closes, while
// tensors that saved it for backward keep their own reference; it is
// made again when the tensor is written in place within the region (its
// Version moves on: an update, a refilled input buffer), where PyTorch's
// cache would hand out the stale copy of an updated parameter; a
// checkpointed region's forward pass runs in a nested region, so its
// copies go when it returns instead of staying until the forward pass
// ends, which is where this differs from PyTorch's cache), and
// cuBLAS accumulates in float32 (tensor.MatMulWith; on the CPU a widened
// sgemm computes the same). Everything else stays float32: softmax and
// log-softmax, layer norm, reductions, exp and log, GELU, dropout and the
// loss. One difference from PyTorch, on purpose: a product's result is
// kept in float32 (tensor.MatMulMode.Float32Out) instead of being rounded
// to the half type, so the element-wise ops that follow see float32
// values and the activations need no promotion; the half copies are
// transient. Where the consumer would take the result in the half type
// anyway, the producer makes it there as PyTorch does, and that saves a
// write, a cast and, for what backward keeps, half the bytes: a GPT
// block's q/k/v product (autograd.LinearHalf, read by the fused
// attention), its MLP's hidden product (read by the GELU, widened) and the
// head's logits (autograd.LinearCrossEntropy); a norm that feeds only
// products writes its output in the half type (autograd.LayerNormHalf,
// the same bits the products' cast gives). Gradients follow the same
// rule: an op whose backward multiplies its output gradient in half
// products takes it in the half type as its producer wrote it (autograd's
// half gradients), where it would otherwise be widened and cast back.
// Backward runs its products in the dtype the forward used (autograd
// captures the state at the forward), outside any region.
//
// TF32 (State.TF32) lets float32 products use TF32 tensor cores on the
// GPU; it is off unless asked for, as in PyTorch.
//
// # Loss scaling
//
// GradScaler is PyTorch's dynamic loss scaling for float16 (65536 at
// start, x2 after 2000 good steps, x0.5 and a skipped step on inf/NaN);
// Unscale runs one fused pass over all gradients (tensor.UnscaleGrads:
// one kernel launch on a GPU) that tests each product, so below a scale
// of 1, where dividing multiplies, a finite gradient that overflowed is
// found in the same pass. The scale stays a
// float32 the gradients can be divided by: backing off stops at 2^-126
// (float32's smallest normal), growth at float32's largest finite number,
// and Unscale, Record and LoadMetadata refuse a Scale outside [2^-126,
// max float32], and factors PyTorch's GradScaler refuses (GrowthFactor
// not above 1, BackoffFactor outside (0, 1)) or a GrowthInterval below 1.
// bfloat16 and float32 need no scaling, and a disabled
// scaler is a no-op, so a training loop is one code path for every
// precision.
//
// Loss scaling needs float32 gradients: an enabled scaler unscales and
// checks contiguous float32 gradients only. Half gradients
// (nn.GPT.SetBlockGradDType, autograd's Var.SetGradDType) are for
// bfloat16 autocast, which needs no scaler; under float16 autocast keep
// the gradients in float32. An enabled (float16) scaler's Unscale refuses
// a half gradient with an error saying so (tensor.ErrDType), before
// changing any, and a call with no gradient at all (none given, or nil
// ones only: backward did not run) with tensor.ErrArgument, where a step
// that checked nothing would count towards the scale's growth (PyTorch's
// GradScaler asserts an inf check was recorded).
//
// Layering: amp imports only tensor, so autograd's ops can consult the
// autocast state; checkpoint and nn sit above both.
package amp
