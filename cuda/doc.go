// Package cuda binds the CUDA driver API, cuBLAS and cuBLASLt at run
// time, without cgo. It is the bottom layer of strata: the memory manager
// builds its device, managed and mapped-host tiers on it, and the tensor package
// launches its kernels and GEMMs through it. It imports nothing else of
// the project.
//
// # Loading
//
// A program built with CGO_ENABLED=0 on a machine without CUDA runs
// unchanged on a GPU machine: the libraries are opened with dlopen (through
// github.com/ebitengine/purego) the first time anything needs them. Init
// does that once per process and caches the outcome; Available reports
// whether a GPU is usable. libcuda is looked for as libcuda.so.1, then
// libcuda.so (the dynamic loader's own search: LD_LIBRARY_PATH, the ld.so
// cache), then in the usual driver folders; STRATA_CUDA_LIB names the file
// instead, and then nothing else is tried. cuBLAS is found the same way
// (libcublas.so.13, .12, the unversioned name; $CUDA_HOME, /usr/local/cuda
// and the versioned toolkit folders; STRATA_CUBLAS_LIB overrides) when the
// first BLAS handle is created, and cuBLASLt likewise (libcublasLt.so.13,
// .12, the unversioned name, in the same folders; STRATA_CUBLASLT_LIB
// overrides) when the first BLASLt handle is. A failure lists every file
// tried, the loader's message for each, and how to fix it, and wraps
// ErrNoDriver (or ErrNoCUBLAS, ErrNoCUBLASLt). The toolkit's stub libcuda
// is recognised by its CUDA_ERROR_STUB_LIBRARY and reported as such.
//
// Entry points are resolved by their versioned names, the ones the CUDA
// 12 and 13 headers map the plain names to (cuMemAlloc_v2,
// cuMemcpyHtoD_v2, cuMemAdvise_v2, cuMemPrefetchAsync_v2, ...): calling
// the unversioned export would use the older ABI. The primary context
// (cuDevicePrimaryCtxRetain) avoids cuCtxCreate, whose signature changed
// in CUDA 13. A driver lacking a required entry point fails Init with the
// list of what is missing. A few are optional: memory pools
// (cuMemAllocAsync), cuMemAdvise_v2 and cuMemPrefetchAsync_v2 (added
// during CUDA 12), cuFuncGetParamInfo (12.4+), the virtual memory API
// (vmm.go) and stream capture into graphs (graph.go: BeginCapture,
// EndCapture, Instantiate, Launch: the work queued on a stream recorded
// once and replayed in one call); a call that needs a missing one
// returns an error wrapping ErrNotSupported. cuEventElapsedTime_v2 is used
// where present, else the older export of the same signature.
//
// # Calls
//
// Every C function is called through purego.SyscallN with integer
// arguments. A CUresult or cublasStatus_t is a C int: only the low 32 bits
// of the return register are read. A struct passed by value, CUmemLocation
// {int type; int id}, is 8 bytes of integer class, which the System V
// AMD64 ABI (and AAPCS64) pass in one general register: Location.packed
// builds that word. No call passes a float by value (cuBLAS takes alpha
// and beta by pointer), which SyscallN could not mix with integers.
//
// Calls whose arguments hold no Go pointers go through a pooled frame: its
// argument words and out-parameter slots are one heap object, reused, so
// such a call allocates nothing (TestEntryDoesNotAllocate). Calls that
// pass Go memory (host buffers of copies, names, JIT options) go through
// functions marked go:uintptrescapes, with the pointer converted in the
// argument list itself, which keeps the memory alive and in place for the
// call (rule 4 of package unsafe); they allocate one small slice. Every
// call is counted: DriverCalls, sampled around a training step, says how
// many driver calls the step made.
//
// # Errors
//
// A failed call becomes an *Error: the C function, the arguments worth
// knowing (sizes, pointers, the kernel and its launch configuration), the
// status code, and its name and description as the library reports them
// (cuGetErrorName and cuGetErrorString, or cublasGetStatusName; a table
// when they cannot say). errors.Is maps codes to the sentinels
// ErrOutOfMemory, ErrInvalidValue, ErrNoDevice, ErrNoDriver and
// ErrNotSupported. Misuse caught before any call (a negative size, a nil
// pointer, a stream of another context, a block of 2048 threads, a lda
// smaller than the matrix) gets an error naming the operation and the
// values, wrapping ErrInvalidValue. Error values are built only on the
// failure path.
//
// # Threads
//
// A CUDA context is current per OS thread, and goroutines move between
// threads: a call on a thread where the context is not current fails with
// CUDA_ERROR_INVALID_CONTEXT (seen on the H200). The options, with costs
// measured on the 2-core AMD EPYC development machine (bench_cpu_test.go;
// the GPU machine's numbers come from gpu_bench_test.go):
//
//   - Lock the goroutine to its thread and call cuCtxSetCurrent before
//     every call: LockOSThread/UnlockOSThread cost 2 ns, but the extra
//     purego call about 72 ns plus the driver's own work; the whole entry
//     measured 174 ns against 96 ns without it (BenchmarkEntry).
//   - Remember which threads already have the context current: asking
//     the kernel for the thread id (gettid) costs 107 ns, more than the
//     cuCtxSetCurrent it would save, and cuCtxGetCurrent is itself a
//     purego call.
//   - Funnel every call through one goroutine locked to a thread: a
//     channel round trip to a locked goroutine costs 9 to 13 µs, because
//     each hand-off wakes an OS thread. Far too slow for launches.
//
// The binding therefore locks the calling goroutine to its thread for the
// duration of each call, and, while a single context is in use (one GPU,
// the common case), enters optimistically: the call goes straight to the
// driver, and only if it answers CUDA_ERROR_INVALID_CONTEXT is the context
// made current and the call repeated. A failed call has no effect, so the
// retry is safe, and a thread keeps the context once it has been set
// there, so the retry happens about once per OS thread over the life of
// the process. With two or more contexts retained, a thread may hold the
// other device's context, which the driver would accept silently, so
// every call then sets its own context first. cuBLAS calls always set it:
// cuBLAS takes its device from the current context. Context.Do locks the
// thread and sets the context once for a batch of calls, and is the way to
// call the driver or other CUDA libraries directly with Handle(). The
// tests run every kind of call on a thread where no context is current,
// under both policies (TestGPUThreadWithoutCurrentContext), and hammer the
// API from 32 migrating goroutines (TestGPUConcurrentGoroutines).
//
// # Memory
//
// Context offers the allocators the memory manager composes: plain device
// memory (MemAlloc, MemFree: 70 to 150 µs a pair from Go on the H200,
// hence the manager's pools); stream-ordered allocations from the device's
// default pool (MemAllocAsync, MemFreeAsync: 2 to 8 µs; raising
// SetMemPoolReleaseThreshold keeps freed memory cached across
// synchronisations); managed memory attached globally (MemAllocManaged)
// with MemAdvise (read-mostly, preferred location, accessed-by, and their
// unsets) and MemPrefetchAsync to a device or to the host; page-locked
// host memory (MemHostAlloc, returning the pointer and a []byte view,
// optionally portable, write-combined, or mapped into the device address
// space, whose device alias MemHostGetDevicePointer returns); copies in
// every direction, synchronous or ordered on a stream, with host memory as
// a []byte or a pointer; and memsets. UnsafeHostView gives a []byte over
// managed or mapped memory.
//
// # Kernels
//
// ModuleLoadData loads a cubin, a fatbin or PTX text (JIT-compiled by the
// driver; its error log is put into the error), copied first to 8-byte
// aligned, NUL-terminated memory. cuLaunchKernel takes an array of
// pointers to the argument values, which must be C memory or pinned Go
// memory. Args builds that array in blocks of memory mapped outside the Go
// heap (arena.go): chained calls (a.Reset().Ptr(x).Int32(n)) write each
// value and its pointer in place, with no allocation and nothing for the
// garbage collector to pin, and a dropped Args returns its block through a
// runtime cleanup. A launch with an Args is exactly one driver call and no
// Go allocation (TestLaunchCostOneCallNoAllocation on the CPU,
// TestGPUVectorAddKernel on the GPU); its host-side cost, validation
// included, is 90 ns on the development machine against a fake driver.
// Where the driver can report a kernel's parameter sizes
// (cuFuncGetParamInfo, CUDA 12.4+), every launch checks the arguments
// against them, so a missing argument or an int64 passed for an int is an
// error instead of garbage on the GPU. LaunchKernel takes the arguments as
// Go values instead (boxing them allocates); Go's int is refused there
// because its size does not say which C type is meant.
//
// # cuBLAS
//
// A BLAS handle belongs to one context; its methods serialise on a mutex.
// SgemmStridedBatchedRowMajor (float32, what tensor's MatMul calls) and
// GemmStridedBatchedExRowMajor (f16, bf16 or f32 inputs and a float32
// compute type, for mixed precision) take row-major matrices, validate
// in row-major terms and run cuBLAS's column-major strided batched call
// as C^T = op(B)^T op(A)^T on the same bytes (a single product is a
// batch of 1).
// SetWorkspace hands cuBLAS scratch memory from the caller's pool, and
// SetStream re-applies it, since cuBLAS drops it when the stream changes.
//
// # What is verified where
//
// Without a GPU (CI, every run): error formatting and sentinels, library
// discovery and its messages (a bogus STRATA_CUDA_LIB, a library that is
// not the driver, the search order), the calling layer against libc (out
// parameters, 23 arguments, no allocation), the entry policy and its call
// counts against a fake driver, argument marshalling and its limits,
// launch validation and cost, CUmemLocation packing, module image
// detection, and the row-major to column-major GEMM conversion against a
// reference. With a GPU (gpu_*_test.go, skipped without one; run on the
// H200 by building the test binary here with CGO_ENABLED=0): device
// properties, copy round trips of random data, async copies and memsets,
// out of memory, managed memory with every advice and prefetches both
// ways read back on the host, mapped host memory read through its device
// alias by a copy and by a kernel, stream-ordered pools, event timing and
// cross-stream waits, PTX kernels (vector add, a probe of every argument
// size, a broken module's JIT log), calls on threads without a current
// context, the float32 GEMM in all transpose combinations with padded
// rows, batched and with a shared operand against a float64 reference,
// the typed GEMM in f16 and bf16 with f32 and 16-bit output, and 32 goroutines
// at once. gpu_bench_test.go times allocation pairs, launches and the
// entry policies there.
package cuda
