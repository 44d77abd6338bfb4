// gemm.cuh: a float64 strided-batched GEMM, C = alpha op(A) op(B) + beta C
// on row-major matrices (matrix z of each operand starts z*stride elements
// after the first; stride 0 broadcasts). cuBLAS runs every float32 product;
// float64 exists for gradient checks and references, where a plain 16 x 16
// shared-memory tiling is plenty, and keeps the package free of a double
// BLAS binding. beta == 0 never reads C (it may hold garbage or NaN).
#pragma once
#include "common.cuh"

#define GEMM_TILE 16

extern "C" __global__ void __launch_bounds__(256)
    gemm_f64(int transA, int transB, i64 m, i64 n, i64 k, double alpha, const double* A, i64 lda, i64 sA,
             const double* B, i64 ldb, i64 sB, double beta, double* C, i64 ldc, i64 sC, i64 batch) {
  __shared__ double As[GEMM_TILE][GEMM_TILE + 1], Bs[GEMM_TILE][GEMM_TILE + 1];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const i64 row = (i64)blockIdx.y * GEMM_TILE + ty, col = (i64)blockIdx.x * GEMM_TILE + tx;
  for (i64 z = blockIdx.z; z < batch; z += gridDim.z) {
    const double *a = A + z * sA, *b = B + z * sB;
    double acc = 0;
    for (i64 p0 = 0; p0 < k; p0 += GEMM_TILE) {
      const i64 pa = p0 + tx, pb = p0 + ty;
      double av = 0, bv = 0;
      if (row < m && pa < k) av = transA ? a[pa * lda + row] : a[row * lda + pa];
      if (pb < k && col < n) bv = transB ? b[col * ldb + pb] : b[pb * ldb + col];
      As[ty][tx] = av;
      Bs[ty][tx] = bv;
      __syncthreads();
#pragma unroll
      for (int q = 0; q < GEMM_TILE; q++) acc += As[ty][q] * Bs[q][tx];
      __syncthreads();
    }
    if (row < m && col < n) {
      double* c = C + z * sC + row * ldc + col;
      *c = beta == 0 ? alpha * acc : alpha * acc + beta * *c;
    }
  }
}
