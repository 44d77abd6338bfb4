// Package cpukern holds strata's CPU compute kernels: element-wise math,
// broadcasting binary ops, reductions, softmax, layer norm, embedding
// lookups, cross-entropy, dropout, fused causal attention, optimizer
// steps, dtype casts and strided copies, written over plain Go slices. Matrix products live in
// tensor/internal/blas.
//
// # Layout and validation
//
// Every kernel works on contiguous row-major data, described by sizes
// ((rows, cols), or (outer, mid, inner) for reductions), except Binary and
// CopyStrided, which read strided views: an offset and a layout that the
// tensor package has merged (internal/layout: one stride per merged dim,
// 0 on broadcast dims, negative strides allowed). The tensor package checks
// shapes, dtypes and devices before it calls in, and allocates outputs;
// this package re-checks only what protects memory (lengths, view bounds)
// and panics with a message naming the kernel and the argument. Errors
// that come from data rather than from shapes — an embedding id or a
// class target out of range — are returned, wrapping ErrIndex, before
// anything is written. Where a kernel says so, an output may be the same
// slice as an input (not a partial overlap).
//
// Kernels are generic over Float (float32 for training, float64 for
// gradient checks). A generic entry point tests isF32[T](), a constant in
// each instantiation, and hands float32 data to float32 loops; float64
// goes through the math package.
//
// # Parallelism
//
// ParallelFor(n, grain, fn) splits [0, n) into one contiguous range per
// worker, min(GOMAXPROCS, n/grain) workers, the caller running the first
// range itself. Below two grains it calls fn(0, n) directly. Each kernel
// tests serial() before it even builds the closure it would hand to
// ParallelFor, so small calls allocate nothing and start no goroutine
// (TestSmallKernelsDoNotAllocate). Starting a worker costs about 1-5 µs,
// so the grains aim at tens of microseconds of work per worker:
//
//	grainMem  = 64 Ki elements  copies, adds, casts, vector exp/GELU (~0.2-0.5 ns each)
//	grainMath =  8 Ki elements  tanh, log, sigmoid, dropout, AdamW (~1-5 ns)
//	grainRow  =  8 Ki elements  softmax, layer norm, cross-entropy (~1-3 ns)
//
// Row kernels split by rows (rowGrain = grainRow/cols rows), never inside
// a row. Reductions whose partial results could depend on the split —
// ReduceSum's and ReduceMax's split-mid path, SumSquares, LayerNormBackward's
// dw/db — cut the work into fixed chunks (forChunks) whose boundaries
// depend only on the sizes, keep one float64 partial per chunk in a
// pooled scratch buffer, and add the partials in chunk order: results are
// bit-identical at any GOMAXPROCS (TestReductionsDeterministic).
// ScatterAdd gives each worker a range of destination rows; every row
// receives its contributions in input order, as in the serial loop.
//
// Note that the two vCPUs of the CI machine behave like one core's two
// hyper-threads: compute-bound kernels gain little from the second
// worker there (measured: two threads of exp finish in the time of one
// thread doing both halves). Speed comes first from the single-thread
// loops: bounds checks hoisted by reslicing (a = a[:len(dst)]), four
// independent accumulators in reductions, and no calls in inner loops.
//
// # Float32 math
//
// Go's math package works in float64 and is never inlined; a call per
// element plus two conversions costs ~10 ns. The float32 exp is written
// out inline in one loop, expShiftSum32, which every exp-based kernel
// (softmax, log-softmax, cross-entropy, sigmoid, Exp and their backwards)
// runs over its rows or over 256-element stack blocks in three tight
// passes (argument, exp, combine). The algorithm: Cody-Waite range
// reduction x = k ln2 + r, |r| <= ln2/2, a degree-7 polynomial for
// e^r - 1, and 2^k built in the exponent bits; arguments below -104 give
// exactly 0, other arguments outside the normal range and NaN fall back
// to math.Exp. tanh32 is expm1(2|x|)/(expm1(2|x|)+2), within 2.2 ulp
// including tiny |x|.
//
// Where the CPU has AVX2 and FMA (x86-64-v3), assembly runs the same
// algorithm on eight lanes with fused multiply-adds (simd_amd64.h): the
// exp loop (exp_amd64.s) and whole GELU forward and backward loops
// (gelu_amd64.s). arith_amd64.s holds eight-lane float32 add, sub, mul and
// div for Binary's contiguous and scalar rows, Scale, AddScalar and Axpy
// (one IEEE operation per lane, so bit-identical to the scalar loops; 3.5-4x
// on cache-resident data). A vector loop stops before a block of eight it cannot
// do exactly (NaN, overflow, subnormal results) and Go finishes that
// block and the tail with the scalar code, so results match the scalar
// path to an ulp or two, never in kind. Measured per element: exp 0.36 ns
// vector, 2.6 ns scalar, both within 1 ulp (TestExp32Accuracy); GELU 0.36
// ns forward and 0.5 ns backward, 4.3x the scalar loops. The purego
// build tag turns the assembly off; TestScalarPaths runs the exp-based
// kernels with it switched off at run time.
//
// GELU uses 0.5 x (1 + tanh u) = x sigmoid(2u), u = sqrt(2/pi)(x +
// 0.044715 x^3): one exp, and no cancellation in 1 + tanh u for negative
// x. In float32 the exp argument itself is rounded, so the result's
// relative error grows like |2u| ulp in the negative tail (2e-6 at
// x = -4), as in any float32 implementation, PyTorch's included; the
// same holds for softmax probabilities far below the row maximum
// (|x - max| ulp).
//
// # Numerics
//
// Softmax, log-softmax and cross-entropy subtract the row maximum before
// exp and sum in float64. As in PyTorch, a row of all -Inf (or one holding
// +Inf or NaN) yields NaN. Sums (ReduceSum, SumSquares, layer-norm
// statistics, dot products) accumulate in float64 with four accumulators,
// folded every 1024 elements (blocked summation), so a float32 sum of 10^6
// values is exact to float32 rounding. LayerNormBackward computes its
// per-element terms in T and adds its row sums in blocks of 64 in T, the
// blocks in float64 (dw and db in float64). LayerNorm takes mean and variance
// in two passes (no E[x^2] - E[x]^2 cancellation) and subtracts the mean
// as its rounding to T and the rest (a large mean costs no accuracy, in
// backward too). SGD updates each
// element in float64 and rounds to T where PyTorch stores a value. Float32
// AdamW runs in float32, operation for operation as PyTorch's: widening
// its operands to float64 chained the loop's iterations through the
// false dependency of cvtss2sd on the previous sqrt and division and
// cost 4x. Max, Min and ReduceMax propagate NaN; Relu(NaN) is NaN.
//
// # Dropout random numbers
//
// Dropout draws no state: element i of a call with (seed, offset) is kept
// iff u >= p, where u = DropoutMask(seed, offset, i) * 2^-32 and, with
// n = offset + i,
//
//	DropoutMask(seed, offset, i) = Philox4x32-10(
//	    counter = (lo32(n/4), hi32(n/4), 0, 0),
//	    key     = (lo32(seed), hi32(seed)))[n mod 4]
//
// Philox4x32-10 is Random123's and cuRAND's counter-based generator
// (TestPhilox4x32KnownAnswers checks Random123's known answers); by
// cuRAND's state layout (counter words x, y hold the block index, z, w the
// subsequence; curand() returns output[n mod 4]) the word above is the one
// curand() returns after curand_init(seed, 0, n).
// The keep test is done as the exact integer comparison
// DropoutMask >= ceil(p * 2^32). Kept values are scaled by 1/(1-p). The
// backward pass is the same call on the gradient; training advances
// offset by the element count after each call. A CUDA kernel computing
// the same function reproduces the CPU mask bit for bit, and any
// sub-range of a call can be computed on its own (what ParallelFor does).
//
// # Files
//
//	parallel.go        ParallelFor, forChunks, grains, scratch pool
//	mathf.go           float32 exp/tanh/sigmoid/GELU, exp loops, dot, row max
//	simd_amd64.h       AVX2+FMA constants and the eight-lane exp macro
//	exp_amd64.s        vector exp loop; gelu_amd64.s vector GELU and backward
//	arith_amd64.s      vector add/sub/mul/div (Binary, Scale, AddScalar, Axpy)
//	simd_amd64.go      CPU detection and the wrappers; simd_other.go stubs
//	unary.go           Unary; unary_backward.go its gradients (op codes: internal/ops)
//	scale.go           Scale, AddScalar, Axpy
//	binary.go          Binary; strides.go view checks, the row cursor
//	reduce.go          ReduceSum, ReduceMax, SumSquares
//	softmax.go         Softmax, LogSoftmax and their backwards
//	causal_softmax.go  CausalSoftmax (mask and softmax in one pass), its backward
//	mask.go            CausalMask
//	layernorm.go       LayerNorm, LayerNormBackward
//	embedding.go       Gather, ScatterAdd
//	crossentropy.go    CrossEntropy, CrossEntropyBackward
//	philox.go          Philox4x32, DropoutMask; dropout.go Dropout
//	attention.go       AttentionForward, AttentionBackward (fused causal attention)
//	optim.go           AdamW, SGD
//	cast.go            float16 and bfloat16 casts; convert.go Convert
//	copy.go            CopyStrided, Fill, Arange
//	types.go           the Float and Number constraints, slice views, length checks;
//	                   errors.go ErrIndex
package cpukern
