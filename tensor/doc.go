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
// tier (host, device, managed, staging, offload), so the hybrid placement
// happens below this package without its callers choosing memory by hand.
// Every op counts an access to each operand's allocation
// (memory.Allocation.Touch, one atomic add) and reads its address at
// launch, so the memory manager's placement scheduler knows how often
// each tensor is used and may migrate it between steps
// (Tensor.Allocation, Tensor.SetLabel name it in its plans). Views
// (Reshape of a contiguous tensor, Transpose, Permute, Narrow, Split,
// Expand, Unsqueeze, Alias) share storage; Contiguous, Clone and To copy.
// A storage counts the writes made to it in place (Tensor.Version, shared
// by its views; version.go), for autograd's check that nothing a
// backward reads changed since the forward pass.
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
// tensor early (autograd does so during backward). An op whose operands
// are all kept tensors cannot tell which context it runs for: its output
// is an orphan, owned by Background's innermost scope when one is open
// and otherwise by no scope until an op combines it with a tensor of a
// context (it joins that context's scope) or Ctx.Adopt hands it to one
// (Ctx.AdoptOrphan: only if it is one). autograd adopts the rest of such
// a chain with it: an op of a context takes the orphans its inputs'
// graphs hold, so a recorded graph goes with the scope whether or not it
// is differentiated (a checkpointed region's included). Code that
// computes from parameters
// alone in its own Ctx (a weight
// conversion, a piece of a parameter nothing else reads) adopts the
// inputs or the results, or releases them. A cleanup attached to every
// tensor that no scope owns (a scope-owned one cannot be collected before
// its scope releases it) returns the storage of a tensor the GC finds
// unreleased and counts it (LeakedTensors; STRATA_DEBUG=1 guards every
// tensor and prints each leak with the stack that made it): a safety net,
// not the mechanism; the test suites fail when it caught anything. Memory
// roles follow the scope too (Scope.SetRole, WithRole).
//
// Scopes close innermost first: closing one while a scope opened after it
// is still open closes it all the same and then panics with an *OpError
// wrapping ErrArgument ("scope closed out of order"). Two goroutines that
// open scopes in Background at once get an *OpError wrapping ErrArgument
// too (an op of one while the other's scope is the innermost) instead of
// releasing each other's tensors: each NewScope of Background reads the goroutine's id;
// other contexts pay nothing, and each goroutine should have its own
// (NewCtx).
//
// # Devices and ops
//
// A Device (CPU, CUDA) implements the unexported backend interface: a
// short list of primitives (strided copy, cast, unary, broadcasting
// binary, reductions, batched GEMM, softmax, layer norm, gather and
// scatter-add, cross-entropy, dropout, AdamW, SGD). The exported ops check
// shapes, dtypes and devices, allocate outputs and call one primitive, so
// a new device implements the primitives and gets every op. A few
// primitives sit behind small optional interfaces a backend may implement
// (ops_amp.go: the multi-tensor gradient unscale and ScaleAll, one
// launch for every gradient a clipped step scales; ops_attention.go: fused
// causal attention, FlashAttention-2 forward and backward with the
// per-row log-sum-exp, no (B, H, T, T) matrix; ops_attention_qkv.go: the
// same over the heads of one (B, T, 3C) q/k/v product, which the CUDA
// tensor-core kernels read and write in place). The CPU
// backend runs internal/cpukern (parallel Go kernels over slices) and
// internal/blas (a system BLAS loaded at run time through purego, with
// gonum's pure-Go GEMM as the fallback). MatMul recognises transposed
// views and broadcast batch axes and hands them to the GEMM without
// copying; a batched left operand times one shared matrix becomes one
// large GEMM. MatMulInto writes a product into an existing tensor with the
// GEMM's own accumulation (c = a@b + beta·c): a sum of products over
// chunks without an add pass, a product into a slice without a copy.
//
// Arithmetic runs in float32 and float64 (gradient checks); float16 and
// bfloat16 are storage dtypes converted by To/Cast, and the operands of
// matrix products (MatMulWith: float32 accumulation, a float32 or half
// result; package amp's mixed precision); int32 holds token ids. A few
// ops read or write the half types around a float32 computation, so that
// mixed precision writes no float32 tensor only to cast it: UnaryTo and
// UnaryBackwardTo (a GELU and its gradient from or to half), LayerNormTo
// (a norm's output in half), CrossEntropyFused (half logits or a half
// gradient) and the attention ops; each gives the bits of the float32 op
// followed by To, or of the float32 op on the widened inputs.
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
// the CPU (with a note on standard error when a GPU is there but not
// usable, naming the cause). The binding is package cuda (purego, no cgo): one
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
// Every op is queued on the device's stream, in program order (one
// exception: AdamWStepsOverlapped and AdamWStepsPipelined queue their
// update on a side stream, one priority level above the device's, in a
// small grid that stays resident beside the forward pass, and fence what
// they write so that the first op to use a parameter or moment waits for
// its group; see
// cuda_side.go and adamw_pipeline.go; the pipelined update brings AdamW
// moments that live in pinned host memory through a copy ring, device slots
// that the copy engines fill and write back on two streams of their own
// while the kernel updates each chunk on the side stream, faster than the
// kernel reading them over the bus itself: cuda_ring.go, and
// STRATA_PIPELINE_TRACE prints the update's timeline,
// cuda_pipeline_trace.go; and MoveTo, whose copies between
// memory tiers run on a copy stream and fence the moved storages the same
// way, so that the first op to use one waits for its copy on the device:
// cuda_move.go; on expandable device memory (memory's virtual-memory
// segments) the copy engines are kept out of it: uploads are staged in
// mapped page-locked buffers and copied by kernel on the stream
// (cuda_stage.go: the synchronous copies used before ran on the legacy
// stream, unordered with ours, the cause of session 20's wrong losses),
// device and tier copies by kernel (cuda_copy.go, cuda_vmm_copy.go); the
// diagnostics EnvMoveVerify, EnvMemoryGuard and EnvVMMCopyEngine are in
// cuda_move_verify.go, cuda_memguard.go and cuda_copy.go), and
// returns at once: one cuLaunchKernel for most primitives (a few for the
// two-pass reductions and layer-norm gradients), cuBLAS
// SgemmStridedBatched for float32 products (GemmStridedBatchedEx with a
// TF32 compute type when asked), GemmStridedBatchedEx for float16 and
// bfloat16 products with float32 accumulation, and a tiled kernel for
// float64 ones. Uploads and downloads are copies on the same stream, so
// they are ordered with the kernels around them, and memory freed by one
// op may be reused by the next without waiting. Reductions accumulate in
// float64 without atomics (partials in fixed chunks, added in order), so
// they are deterministic. The embedding backward sorts (id, position) keys
// on the device and adds each id's rows in position order, as the CPU
// does: its result is the CPU's bit for bit. With cuBLAS deterministic for
// a fixed configuration, a training run on the GPU repeats exactly.
//
// Since ops return before the device runs them, host clocks time the
// host. Timer times the device: its marks are events on the stream, and
// its spans, the device's time between marks beside the host's, show
// where a device waits for the host (train-gpt -bench prints a step's
// phases so).
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
// reading a tensor) synchronize; nothing else does. SumSquaresAll reduces
// many tensors (a model's gradients, for their norm) with one
// synchronization, not one a tensor. CrossEntropyPadded reads rows wider
// than the class count (padded for aligned GEMMs) and its backward writes
// zeros in the padding. MeanDivisor computes a mean's divisor on the
// device (a training step's loss needs no count on the host). Float16 and
// bfloat16 arithmetic other than matrix products and the ops above is
// refused with ErrDType on both devices (cast first).
//
// # CUDA graphs
//
// CaptureGraph records the work a function queues on a CUDA device into a
// graph that Graph.Launch replays with one driver call (graph.go says what
// a capture can hold). Allocations made while capturing come from a
// private pool that the memory manager holds for the graph's lifetime
// (memory.CUDAStreams.Private, memory.StreamHolder), so each replay finds
// its blocks where the capture left them; kernel argument tables go to
// mapped host memory the graph keeps. A training step is capturable in its
// guarded form (guard.go): StepGuard.ClipGradNorm computes the norm, the
// clip factor and a skip flag on the device, and AdamWStepsGuarded reads
// the learning rate and bias corrections from an AdamWArgs the host writes
// before each replay; both give the host-driven step's bits.
//
// # Errors
//
// Creating a tensor with New returns an error. Ops panic on misuse (bad
// shapes, dtypes, devices, a released input) or when memory runs out,
// always with an *OpError naming the op, the shapes and dtypes, and
// wrapping a sentinel (ErrShape, ErrDType, ErrDevice, ErrReleased,
// ErrArgument) or the memory error (memory.ErrOutOfMemory). Its Error
// names this package's ops as tensor.Op (tensor.MatMul) and other
// packages' as they qualify them (nn.GPT.Forward, autograd.Backward). Try
// turns such a panic back into an error; training loops wrap each step in
// it.
//
// Interop: package interop/gorgonia converts to and from
// gorgonia.org/tensor (this package does not import gorgonia);
// WriteSafetensors and ReadSafetensors speak the safetensors format of
// PyTorch and Hugging Face.
//
// # Adding an op
//
// An element-wise op is one row of the op table, internal/ops/ops.go: its
// name, its formulas and what its backward reads (Reads: x, y or
// neither), under a code added at the end of its list. Everything below
// follows that row; each step names the one test file to extend. For a
// unary op:
//
//  1. Table: the constant and its Unaries row in internal/ops/ops.go, then
//     `go generate ./tensor/internal/ops`, which rewrites ops_gen.go
//     (tensor.OpXxx) and kernels/ops_gen.cuh (the CUDA enum). Test:
//     internal/ops/gen/main_test.go, nothing to add: it fails while a
//     generated file is stale, checks every code of the CUDA enum and
//     that kernels/elementwise.cuh has a forward and a backward case per
//     op.
//  2. CPU: a case in unary32 and unary64 (internal/cpukern/unary.go) and
//     in unaryBackwardRange (unary_backward.go); ops built on exp run
//     exp32Slice over stack blocks in float32, as Sigmoid does,
//     and take grainMath in unaryGrain. Test:
//     internal/cpukern/unary_test.go, a unaryCases row (float64
//     reference, derivative, input range, float32 tolerance);
//     TestUnaryCoversTheOpTable fails until it exists.
//  3. CUDA: a case in unary_fn and unary_grad (kernels/elementwise.cuh),
//     the CPU's formula in the CPU's order. Then `make kernels` on a
//     machine with nvcc, committing kernels.fatbin and kernels.sha256
//     (TestKernelSourcesMatchFatbin fails until then). Test:
//     cuda_ops_elem_test.go runs every op of the table on every device,
//     comparing with the CPU and a float64 reference; extend unaryInput
//     only if the op needs a restricted domain. cuda_abi_test.go launches
//     every op as well.
//  4. tensor: Unary(OpXxx, t) and UnaryBackward work at once; add a named
//     function to ops_elem.go when users will call it directly.
//  5. autograd: Unary(op, x) differentiates every op of the table; add a
//     named function to autograd/ops_unary.go. Test:
//     autograd/gradcheck_test.go checks every op through Unary already;
//     add a case for the named function.
//  6. nn: an activation function in nn/layers.go, if the op is one.
//  7. PyTorch: a case in tools/golden/ops_cases.py, computed alone with
//     `/usr/bin/python3 tools/golden/ops.py --only <case>` (which rewrites
//     tensor/testdata/golden_ops.safetensors, copying the other cases bit
//     for bit). Test: an entry in the unaryOps map of
//     autograd/golden_tensor_test.go (the case's op name to OpXxx),
//     through which autograd/golden_test.go runs it with autograd.Unary;
//     then raise the count of cases that TestGoldenOpsAgainstPyTorch
//     pins there (61 with gradients, 11 forward-only).
//
// A binary op takes the same path through its Binaries row, binScalar
// (internal/cpukern/binary.go; test binary_test.go), binary_fn
// (kernels/elementwise.cuh) and the list in testOpsAffineAndBinary
// (cuda_ops_elem_test.go); its gradient is written by hand in
// autograd/ops_arith.go. A named function in ops_elem.go whose name is not
// the op's (Maximum runs OpMax) gets a binaryFuncs entry there, so that
// the op's errors name the function (test: binary_op_names_test.go).
//
// An op that is not element-wise is a new primitive, as LayerNorm is: its
// kernel in internal/cpukern/<op>.go (test: <op>_test.go, against a
// float64 reference); a method of the backend interface (backend.go),
// implemented in cpu_kernels.go and by a launcher in cuda_<group>.go; the
// CUDA C in kernels/<op>.cuh, included from all.cu, its kernel names
// bound in cuda_kernels.go (test: driveBackend in cuda_abi_test.go, which
// must reach every launch variant); the exported op in ops_<group>.go,
// which checks shapes, dtypes and devices, allocates the output and calls
// the primitive (test: a case in the conformance suite,
// cuda_ops_<group>_test.go); then autograd, nn and PyTorch as in steps 5
// to 7. An op that reads strided views hands the backend a layout merged
// once here (mergeDims, internal/layout), which both backends run as it
// is: the CPU kernels walk its rows; the CUDA kernels take it as Layout1
// or Layout2 when at most 8 dims remain, and the op is refused otherwise.
package tensor
