// all.cu: the one translation unit of strata's CUDA kernels. nvcc compiles
// it into tensor/kernels.fatbin (make kernels): SASS for sm_80 and sm_90
// and PTX for compute_80, which newer GPUs JIT-compile at load time. The
// Go side (tensor/cuda_*.go) loads the fatbin with cuModuleLoadData and
// finds every kernel by its extern "C" name; it launches them with
// cuLaunchKernel, one launch per primitive where possible.
//
// Conventions, shared by every file included below:
//   - Kernels are named <op>[_<variant>]_<type>: type f32/f64 for float
//     math, b2/b4/b8 for kernels that move raw 2-, 4- or 8-byte words.
//   - Sizes and indices are 64-bit (i64); element loops are grid-stride
//     (FOR_N), so any grid covers any size. Contiguous memory-bound
//     kernels move 16 bytes a thread when their pointers allow (map_vec in
//     common.cuh; launchVec on the Go side). Strided kernels come in an
//     _i32 variant (32-bit index division, used when the element count
//     fits) and an _i64 one.
//   - Results match the CPU kernels of tensor/internal/cpukern: the same
//     formulas in the same order, sums in double, NaN handled the same
//     way; casts and dropout are bit-exact (see each file).
//   - Kernels that validate data report through the Status block
//     (common.cuh) instead of reading out of bounds.
//
// After editing any file here run `make kernels` on a machine with nvcc
// and commit tensor/kernels.fatbin and tensor/kernels.sha256 with it; a
// test fails while the sources and the recorded hash disagree.

#include "common.cuh"
#include "cast.cuh"
#include "copy.cuh"
#include "elementwise.cuh"
#include "reduce.cuh"
#include "softmax.cuh"
#include "layernorm.cuh"
#include "embedding.cuh"
#include "crossentropy.cuh"
#include "dropout.cuh"
#include "optim.cuh"
#include "gemm.cuh"
#include "amp.cuh"
#include "attention.cuh"
