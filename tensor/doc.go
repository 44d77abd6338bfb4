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
// Scope of its context (Ctx) when it is created, and closing the scope
// releases it. A training step runs inside one scope; parameters and
// optimizer state are created outside, with NewKept, or taken out with
// Keep. A Ctx is one goroutine's state (its scope stack and role, and
// slots for autograd's grad mode and amp's autocast): tensors record
// their Ctx and ops take it from their operands, creation functions are
// Ctx methods, and the package-level ones use Background (ctx.go;
// autograd's doc explains the design). Ctx.BytesInUse counts a context's
// live storage, a goroutine's own view of its memory. Release frees one
// tensor early (autograd does so during backward). A cleanup attached to
// each tensor returns the
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
// bfloat16 are storage dtypes converted by To/Cast, and the operands of
// matrix products (MatMulWith: float32 accumulation, a float32 or half
// result; package amp's mixed precision); int32 holds token ids.
//
// # CUDA
//
// CUDA(n) opens GPU n once per process (cuda_device.go): its primary
// context, one non-blocking stream, the kernels, the hybrid memory manager
// (memory.NewCUDAManager: pooled device, managed and staging memory, with
// the stream registered so blocks are cached for it), a small status
// block, and a cuBLAS handle bound to the stream with a workspace from the
// manager. Without a driver or a GPU, CUDA returns an error wrapping
// ErrDevice and the cuda package's cause, and ParseDevice("auto") picks
// the CPU. The binding is package cuda (purego, no cgo): one
// CGO_ENABLED=0 build runs everywhere.
//
// The kernels are CUDA C under kernels/ (all.cu includes the rest), one
// extern "C" kernel per primitive, dtype and variant, written to give the
// CPU kernels' results: the same formulas in the same order, sums in
// float64, casts and dropout bit-exact. `make kernels` compiles them with
// nvcc into kernels.fatbin (SASS for sm_80 and sm_90, PTX for compute_80),
// which this package embeds, and records the sources' hash in
// kernels.sha256; a test fails when the two disagree. STRATA_KERNELS=file
// loads another fatbin instead, so a GPU machine can compile and test
// changed kernels without rebuilding Go. The kernels are looked up once,
// at open; a test reads the parameter tables nvcc wrote into the fatbin
// and checks every launcher's arguments against them, without a GPU.
//
// Every op is queued on the device's stream, in program order, and
// returns at once: one cuLaunchKernel for most primitives (a few for the
// two-pass reductions and layer-norm gradients), cuBLAS
// SgemmStridedBatched for float32 products and a tiled kernel for
// float64 ones. Uploads and downloads are copies on the same stream, so
// they are ordered with the kernels around them, and memory freed by one
// op may be reused by the next without waiting. Reductions accumulate in
// float64 without atomics (partials in fixed chunks, added in order), so
// they are deterministic. The embedding backward sorts (id, position) keys
// on the device and adds each id's rows in position order, as the CPU
// does: its result is the CPU's bit for bit. With cuBLAS deterministic for
// a fixed configuration, a training run on the GPU repeats exactly.
//
// Errors found by kernels in the data (an embedding id or a class target
// out of range) cannot be returned by the call that queued the kernel.
// The kernel skips the bad row and writes a report (op, position, value)
// into the status block, which lives in mapped pinned host memory, so the
// host reads it without a copy. The report is raised at the next
// synchronization: Device.Synchronize returns it as an *OpError naming
// the op (wrapping ErrArgument), and reading a tensor (Float32s, Item,
// ToDevice, ...) panics with it. CrossEntropy must return its count on
// the host, so it synchronizes and reports a bad target itself, as on the
// CPU. Ops whose result goes to the host (SumSquares, CrossEntropy,
// reading a tensor) synchronize; nothing else does. Float16 and bfloat16
// arithmetic other than matrix products is refused with ErrDType on both
// devices (cast first).
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
// Interop: package interop/gorgonia converts to and from
// gorgonia.org/tensor (this package does not import gorgonia);
// WriteSafetensors and ReadSafetensors speak the safetensors format of
// PyTorch and Hugging Face.
package tensor
