// Package tensor is strata's n-dimensional array: dtypes, shapes, strided
// views, devices, and the operations a GPT needs, forward and backward,
// without autograd (package autograd records graphs on top of these ops).
//
// # Tensors and storage
//
// A Tensor is a strided view (shape, strides and offset in elements) of a
// reference-counted storage. Storage comes from the device's
// memory.Manager: every allocation carries a memory.Role (parameter,
// gradient, activation, ...) and the manager's policy maps the role to a
// tier (host, device, managed, staging), so the hybrid placement happens
// below this package without its callers choosing memory by hand. Views
// (Reshape of a contiguous tensor, Transpose, Permute, Narrow, Split,
// Expand, Unsqueeze, Alias) share storage; Contiguous, Clone and To copy.
//
// # Lifetimes
//
// Go's garbage collector does not see device memory and finalizers run far
// too late, so lifetimes are explicit but automatic in practice
// (TensorFlow.js's tidy): every tensor is owned by the innermost open
// Scope when it is created, and closing the scope releases it. A training
// step runs inside one scope; parameters and optimizer state are created
// outside or taken out with Keep. Release frees one tensor early (autograd
// does so during backward). A cleanup attached to each tensor returns the
// storage of a tensor the GC finds unreleased and counts it
// (LeakedTensors; STRATA_DEBUG=1 prints each leak): a safety net, not the
// mechanism. Memory roles follow the scope too (Scope.SetRole, WithRole).
//
// # Devices and ops
//
// A Device (CPU, CUDA) implements the unexported backend interface: a
// short list of primitives (strided copy, cast, unary, broadcasting
// binary, reductions, batched GEMM, softmax, layer norm, gather and
// scatter-add, cross-entropy, dropout, AdamW, SGD). The exported ops check
// shapes, dtypes and devices, allocate outputs and call one primitive, so
// a new device implements the primitives and gets every op. The CPU
// backend runs internal/cpukern (parallel Go kernels over slices) and
// internal/blas (a system BLAS loaded at run time through purego, with
// gonum's pure-Go GEMM as the fallback). MatMul recognises transposed
// views and broadcast batch axes and hands them to the GEMM without
// copying; a batched left operand times one shared matrix becomes one
// large GEMM.
//
// Arithmetic runs in float32 and float64 (gradient checks); float16 and
// bfloat16 are storage dtypes converted by To/Cast (mixed precision casts
// at op boundaries); int32 holds token ids.
//
// # Errors
//
// Creating a tensor with New returns an error. Ops panic on misuse (bad
// shapes, dtypes, devices, a released input) or when memory runs out,
// always with an *OpError naming the op, the shapes and dtypes, and
// wrapping a sentinel (ErrShape, ErrDType, ErrDevice, ErrReleased,
// ErrArgument) or the memory error (memory.ErrOutOfMemory). Try turns
// such a panic back into an error; training loops wrap each step in it.
//
// Interop: ToDense and FromDense convert to and from gorgonia.org/tensor;
// WriteSafetensors and ReadSafetensors speak the safetensors format of
// PyTorch and Hugging Face.
package tensor
