// Package blas computes matrix products on the CPU: row-major
// C = alpha*op(A)*op(B) + beta*C in float32 and float64, one product
// (Sgemm, Dgemm) or a strided batch (SgemmStridedBatched,
// DgemmStridedBatched). It is the engine under the tensor package's
// matmul, and the CPU speed of a GPT rests on it.
//
// # Where products run
//
// On first use the package loads a system BLAS at run time with purego
// (no cgo: a CGO_ENABLED=0 binary loads it too) and keeps it for the
// life of the process:
//
//  1. STRATA_BLAS, when set: "go" forces the fallback without a library
//     (the own kernel below where the CPU has it), "gonum" forces gonum
//     alone; anything else is the path or soname of the one library to
//     load. If it cannot be used, the fallback runs and says why.
//  2. Otherwise optimized builds by name, first found wins:
//     libopenblas.so.0 (Debian's libopenblas0-pthread and most
//     distributions), libopenblasp.so.0 (Fedora), libopenblas.so,
//     /opt/OpenBLAS/lib and /usr/local/lib (upstream and BSD installs),
//     MKL's libmkl_rt.so.2, BLIS's libblis.so.4 (Homebrew OpenBLAS and
//     Accelerate on macOS). Generic names such as libblas.so.3 are not
//     tried: they are often reference BLAS, slower than the fallback.
//  3. Otherwise the fallback: float32 on the package's own AVX2+FMA
//     kernel (amd64 CPUs that have both; see "The own kernel"), float64
//     and every other CPU on gonum.org/v1/gonum/blas/gonum.
//
// A library is used only if it exports sgemm_ and dgemm_, is not an
// ILP64 build, and computes a small product with both transposes right
// (a self-test that catches ABI mismatches before real work meets
// them). Backend() tells in one line what was chosen: "openblas 0.3.21
// (Cooperlake kernels, /usr/lib/.../libopenblasp-r0.3.21.so), 2
// threads", "go (AVX2+FMA 6×16 kernel, float64 on gonum; no BLAS library
// found; tried ...), 2 threads", or "gonum (...), 2 threads".
// A library that is present but unusable makes TestDiscoverSystem fail.
//
// # Calling the library
//
// The Fortran entry points sgemm_ and dgemm_ are called, not CBLAS:
// every BLAS exports them, and since Fortran takes every argument by
// address they go through purego.SyscallN, which passes only integer
// registers. cblas_sgemm takes alpha and beta in float registers, which
// only purego's reflective RegisterFunc can pass: 0.57 µs and 12
// allocations a call, against 0.17 µs and none here. A row-major product
// is the column-major product of the transposes, C^T = op(B)^T·op(A)^T,
// so the call swaps the operands and m with n. The Fortran scalars live
// in pooled heap frames that also hold the operand pointers during the
// call; dimensions beyond 32 bits go to gonum.
//
// # Threads: Go splits, the library runs on one thread
//
// The library's own thread pool is pinned to one thread
// (openblas_set_num_threads(1), and OPENBLAS_NUM_THREADS=1 while it
// loads so that no pool is started); the package spreads work over
// goroutines itself, SetThreads of them (GOMAXPROCS by default):
//
//   - m*n*k < 256: gonum on the calling goroutine; a call into C costs
//     more (0.17 µs against 0.04 µs for 1×1×1; they meet near 6×6×6).
//   - one product, m*n*k < 2^21: the library on the calling goroutine.
//   - one larger product: the longer side of C cut into two pieces per
//     thread (multiples of 16 rows or columns; a last piece narrower
//     than 16 joins the one before it), handed out from an atomic
//     counter, so that a helper that wakes late (tens of µs on a virtual
//     machine) or shares its core simply takes fewer pieces.
//   - a batch of at least 2^20 multiply-adds in all: one matrix per
//     piece, the same way; with fewer matrices than threads, each is split
//     as above; smaller batches run serially.
//
// The number of threads does not change the bits of C on the own kernel
// (TestGemmBitsIndependentOfThreads), so that a training run with a
// fixed seed repeats exactly on a 2-core and a 16-core machine: every
// element of C is summed in the same order, with the same FMAs, whatever
// piece it falls in. A piece runs on the same path as the whole product
// (never gonum for a piece below 256 multiply-adds, never the one-row
// path for a piece of one row: hence the rule on narrow last pieces),
// and an element rounds the same in an edge tile as in a full one (see
// "The own kernel"). gonum's blocks depend on the sizes alone, not on
// GOMAXPROCS. A library keeps its register tiles where they lie in the
// whole product (the cuts are multiples of 16), but how it sums within
// one call of a given size is its own affair.
//
// Why not OpenBLAS's own threads: after each call its pool threads spin
// for up to 2^28 cycles, and Go code that runs next on the same two cores
// runs at half speed. A training step interleaves products with Go
// elementwise work; measured (TestMeasureStrategies, STRATA_BLAS_MEASURE=1)
// on the 2-core Zen 5 development machine, one 1024×128·128×384 product
// followed by an elementwise pass over 1M floats on two goroutines, in µs:
//
//	                    Cooperlake kernels          Haswell kernels
//	                  step  product  Go work     step  product  Go work
//	goroutine split    480      253      227      658      437      236
//	OpenBLAS 2 threads 696      254      443      844      410      433
//	one thread         674      423      237     1018      767      245
//	Go work alone                        227                        242
//
// On its own a product runs as fast either way, and batches of small
// products, which OpenBLAS never threads (m*n*k below its threshold),
// run nearly twice as fast split over goroutines. GFLOP/s, best of 7
// rounds, OpenBLAS 0.3.21 (GPT shapes: rows = batch 16 × context 64,
// width 128; attention: 64 sequence-heads, context 64, head width 32):
//
//	                          Cooperlake kernels         Haswell kernels
//	                        split  1 thr  2 thr gonum  split  1 thr  2 thr gonum
//	1024×1024×1024            451    237    462    31    238    130    258    32
//	1024×128 · 128×384        434    243    446    32    246    131    250    34
//	1024×128 · (512×128)^T    433    242    455    36    249    134    252    38
//	1024×512 · 512×128        429    237    438    33    245    131    249    34
//	1024×128 · (256×128)^T    405    236    429    36    235    131    246    38
//	(1024×128)^T · 1024×384   368    217    393    20    232    129    246    20
//	(1024×512)^T · 1024×128   384    222    412    17    238    128    241    21
//	(1024×128)^T · 1024×512   370    216    376    15    245    129    249    18
//	1024×384 · (128×384)^T    416    236    436    38    245    130    249    39
//	64 × 64×32 · (64×32)^T    249    144    144    25    181     96     96    26
//	64 × 64×64 · 64×32        390    220    219    23    191    103    104    25
//	64 × 64×32 · 32×64        403    218    220    30    196    107    107    32
//	64 × (64×64)^T · 64×32    397    219    217    23    193    104    104    26
//
// OpenBLAS's threads win only on products of about 2^21 to 2^24
// multiply-adds timed back to back, where its spinning pool is already
// awake (128³: 349 against 297 GFLOP/s), which is the case the spin
// makes slower everywhere else. The machine is shared and noisy: medians
// run 2-20% under these bests.
//
// OpenBLAS picks its kernels for the CPU when it loads, unless
// OPENBLAS_CORETYPE says otherwise. The development machine's environment
// sets OPENBLAS_CORETYPE=Haswell (AVX2), which halves sgemm there against
// the Cooperlake (AVX-512) kernels OpenBLAS picks by itself; the package
// leaves the variable to the user, and Backend() names the kernels in
// use.
//
// # The own kernel
//
// Without a library, float32 products run on the package's own GEMM
// (own.go, pack.go, kernel_amd64.s, kernel512_amd64.s and their direct
// forms kerneld_amd64.s, kernel512d_amd64.s, the shared parts in
// tile256_amd64.h, tile512_amd64.h), built the GotoBLAS/BLIS way:
//
//   - a micro-kernel in Go assembly holds a 6×16 tile of C in twelve YMM
//     registers (AVX2+FMA) or a 6×32 tile in twelve ZMM registers
//     (AVX-512, preferred where x/sys/cpu reports it) and, per step of k,
//     loads one row of packed B, broadcasts 6 elements of packed A and
//     issues 12 FMAs (unrolled four steps a turn); at the end it stores
//     alpha*tile + beta*C, reading C only when beta != 0, so NaN in C
//     does not leak when beta == 0;
//   - operands are packed into pooled per-goroutine buffers (no
//     allocation on the hot path): op(A) in strips of 6 rows, op(B) in
//     strips of 16 or 32 columns, contiguous along k, zero-padded past
//     the edges; the transposes are handled here, so the kernel sees one
//     layout. A row-major A (not transposed) is not packed: the direct
//     kernels broadcast its elements from its six rows where they lie
//     (lda apart: two base registers and lda as an index), and only a
//     last strip of fewer than 6 rows is packed. At k = 128 (the tiny
//     GPT) packing A cost a quarter of the kernel's time: the direct
//     kernels are 1.02-1.52x faster on its non-transposed products and
//     the main job 7-8% (bench/results/cpu-gemm-direct-a-2026-12-05-s32.md);
//   - cache blocks: k in equal blocks of at most kc = 256 (a 16 or 32 KiB
//     strip of B stays in L1), mc = 144 rows of A (144 KiB, L2) against
//     a panel of nc = 2048 columns of B; the blocks after the first of k
//     add to C (beta = 1);
//   - edge tiles (m or n not a multiple of the tile) are computed by the
//     kernel, alpha and beta included, into a scratch tile that holds
//     their part of C, and copied back: an element is rounded the same
//     in an edge tile as in a full one (alpha times the sum, then beta*C
//     added in one FMA). Where a split product is cut decides which
//     tiles are edges, so this keeps C's bits independent of the thread
//     count (a merge in Go, alpha*t + beta*C rounded twice, did not).
//
// It is split over goroutines exactly as library calls are (above).
// x/sys/cpu decides at start which kernel can run (AVX-512F, or AVX2 and
// FMA, with the registers saved by the OS); other CPUs, -tags purego and
// float64 use gonum, whose blocked GEMM (64×64 blocks, SSE inner loops)
// runs one large product over its own goroutines (GOMAXPROCS of them,
// whatever SetThreads says). The Go version of the micro-kernels
// (kernel_go.go) is the definition the assembly is tested against, and
// lets the driver be tested in every build.
//
// GFLOP/s on the 2-core AMD EPYC sandbox (Zen 5 class, AVX-512; OpenBLAS
// held to Haswell kernels by OPENBLAS_CORETYPE), best (median) of 7
// rounds of TestMeasureStrategies, every column split over 2 goroutines:
//
//	                          go AVX-512    go AVX2       gonum      OpenBLAS Haswell
//	1024×1024×1024            376 (366)     201 (197)     25 (25)    225 (203)
//	1024×128 · 128×384        309 (299)     188 (186)     25 (25)    237 (223)
//	1024×128 · (512×128)^T    308 (290)     188 (185)     25 (25)    233 (223)
//	1024×512 · 512×128        283 (278)     189 (180)     29 (28)    231 (226)
//	1024×128 · (256×128)^T    237 (227)     161 (158)     27 (24)    222 (218)
//	(1024×128)^T · 1024×384   260 (235)     159 (158)     19 (18)    217 (213)
//	(1024×512)^T · 1024×128   282 (271)     175 (169)     18 (15)    224 (221)
//	(1024×128)^T · 1024×512   282 (268)     172 (168)     18 (17)    229 (224)
//	1024×384 · (128×384)^T    257 (238)     170 (164)     36 (35)    227 (223)
//	64 × 64×32 · (64×32)^T    118 (111)      95 (88)      24 (19)    171 (168)
//	64 × 64×64 · 64×32        127 (93)      106 (86)      23 (17)    187 (178)
//	64 × 64×32 · 32×64        208 (145)     122 (106)     30 (28)    187 (186)
//	64 × (64×64)^T · 64×32    138 (99)      105 (100)     24 (22)    184 (182)
//
// End to end, `go run ./examples/train-gpt -config tiny -device cpu
// -bench` trains at about 44,700 tokens/s with STRATA_BLAS=go (AVX-512
// kernel), 7,900 with STRATA_BLAS=gonum and 35,900 on OpenBLAS (Haswell
// kernels), run back to back; with the AVX2 kernel alone it was
// 34,000-35,000 (gonum 8,100, OpenBLAS 40,500 in that run). The batched
// attention products are where the own GEMM trails most: each 64×64
// product packs its operands anew, and one 6-row strip in 11 is an edge
// tile; at k = 128 packing also shows against the AVX-512 kernel (the
// table and tokens/s above predate the direct kernels).
//
// # Semantics and checks
//
// As in BLAS: when beta == 0, C is written without being read (NaN in it
// does not survive); when alpha == 0 or k == 0, A and B are not read and
// C = beta*C; m == 0 or n == 0 does nothing. Otherwise every term
// a[i][l]*b[l][j] counts, a zero times a NaN or an Inf included (NaN, as
// in OpenBLAS, cuBLAS and PyTorch), on every backend: gonum's GEMM skips
// the zeros of A, and gonum.go puts those NaNs back. The entry points
// check sizes, leading dimensions, slice lengths, strides and (for batches)
// that no two C matrices share an element, and panic with a message
// naming the entry point, the argument and the sizes: the tensor ops
// validate first, so these panics are a last line of defence and never
// let the library read outside a slice. C may interleave within rows
// (ldc >= batch*n, strideC == n), as attention heads written side by side
// do. C must not overlap A or B.
package blas
