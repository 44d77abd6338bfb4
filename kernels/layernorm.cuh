// layernorm.cuh: layer norm over the last axis, forward and backward, as
// cpukern/layernorm.go: statistics in double in two passes (mean, then
// squared deviations), biased variance, rstd = 1/sqrt(var + eps); w and b
// are optional (null pointers). A warp handles a row.
//
// The backward writes dx per row (a warp per row) and, when dw or db are
// wanted, reduces dy*xhat and dy over rows deterministically: blocks of
// 32 columns x 8 row-threads sum fixed row chunks into double partials,
// and layernorm_dwdb_final adds the chunks in order into dw and db.
#pragma once
#include "common.cuh"
#include "cast.cuh"

// layernorm writes y as Y: Y = T, or a half type rounded as the cast
// kernels round (layernorm_to: a norm whose output feeds only
// half-precision products, which would cast it anyway).
template <typename T, typename Y>
__device__ void layernorm(Y* y, T* mean, T* rstd, const T* x, const T* w, const T* b, i64 rows, i64 cols,
                          double eps) {
  RowGroup<true> g;
  for (i64 r = g.row; r < rows; r += g.rowStride) {
    const T* xr = x + r * cols;
    Y* yr = y + r * cols;
    double s = 0;
    for (i64 c = g.rank; c < cols; c += g.size) s += (double)xr[c];
    const double mu = g.sum(s, (double*)nullptr) / (double)cols;
    double v = 0;
    for (i64 c = g.rank; c < cols; c += g.size) {
      double d = (double)xr[c] - mu;
      v += d * d;
    }
    v = g.sum(v, (double*)nullptr) / (double)cols;
    const double rs = 1.0 / sqrt(v + eps);
    if (g.rank == 0) {
      mean[r] = (T)mu;
      rstd[r] = (T)rs;
    }
    const T m = (T)mu, st = (T)rs;
    for (i64 c = g.rank; c < cols; c += g.size) {
      T val = (xr[c] - m) * st;
      if (w) val = val * w[c];
      if (b) val = val + b[c];
      store_as(yr + c, val);
    }
  }
}

// layernorm_backward_dx: dx = rstd (g - mean(g) - xhat mean(g xhat)),
// g = dy * w (dy without w), xhat = (x - mean) rstd, all in double.
template <typename T>
__device__ void layernorm_backward_dx(T* dx, const T* dy, const T* x, const T* mean, const T* rstd, const T* w,
                                      i64 rows, i64 cols) {
  RowGroup<true> g;
  const double n = (double)cols;
  for (i64 r = g.row; r < rows; r += g.rowStride) {
    const T *xr = x + r * cols, *gr = dy + r * cols;
    T* d = dx + r * cols;
    const double m = (double)mean[r], rs = (double)rstd[r];
    double sg = 0, sgx = 0;
    for (i64 c = g.rank; c < cols; c += g.size) {
      double xh = ((double)xr[c] - m) * rs;
      double gw = w ? (double)gr[c] * (double)w[c] : (double)gr[c];
      sg += gw;
      sgx += gw * xh;
    }
    const double c1 = g.sum(sg, (double*)nullptr) / n, c2 = g.sum(sgx, (double*)nullptr) / n;
    for (i64 c = g.rank; c < cols; c += g.size) {
      double xh = ((double)xr[c] - m) * rs;
      double gw = w ? (double)gr[c] * (double)w[c] : (double)gr[c];
      d[c] = (T)(rs * (gw - c1 - xh * c2));
    }
  }
}

// layernorm_dwdb_partial: grid (ceil(cols/32), chunks), block 32 x 8.
// partial[(2c) * cols + i] = sum over chunk c's rows of dy * xhat, and
// partial[(2c+1) * cols + i] = sum of dy.
template <typename T>
__device__ void layernorm_dwdb_partial(double* partial, const T* dy, const T* x, const T* mean, const T* rstd,
                                       i64 rows, i64 cols, i64 rowsPerChunk) {
  __shared__ double shw[8][33], shb[8][33];
  const i64 i = (i64)blockIdx.x * 32 + threadIdx.x;
  const i64 lo = (i64)blockIdx.y * rowsPerChunk, hi = min(rows, lo + rowsPerChunk);
  double aw = 0, ab = 0;
  if (i < cols) {
    for (i64 r = lo + threadIdx.y; r < hi; r += blockDim.y) {
      double gi = (double)dy[r * cols + i];
      aw += gi * ((double)x[r * cols + i] - (double)mean[r]) * (double)rstd[r];
      ab += gi;
    }
  }
  shw[threadIdx.y][threadIdx.x] = aw;
  shb[threadIdx.y][threadIdx.x] = ab;
  __syncthreads();
  if (threadIdx.y == 0 && i < cols) {
    for (int k = 1; k < blockDim.y; k++) {
      aw += shw[k][threadIdx.x];
      ab += shb[k][threadIdx.x];
    }
    partial[(2 * (i64)blockIdx.y) * cols + i] = aw;
    partial[(2 * (i64)blockIdx.y + 1) * cols + i] = ab;
  }
}

// layernorm_dwdb_final adds the chunks and writes dw and db (either may be
// null), rounding once: dw = T(sum), so that they need no zero fill
// first. A warp per
// column: lane l sums chunks l, l+32, ... in order and the warp adds the
// lanes' sums in a fixed tree, so the result does not depend on timing.
// (A thread per column left the sum of GPT-2's 43 chunks of 768 columns
// latency-bound on three multiprocessors: 15 us a norm.)
template <typename T>
__device__ void layernorm_dwdb_final(T* dw, T* db, const double* partial, i64 cols, int chunks) {
  const int lane = threadIdx.x & 31;
  const i64 warps = ((i64)gridDim.x * blockDim.x) >> 5;
  for (i64 i = ((i64)blockIdx.x * blockDim.x + threadIdx.x) >> 5; i < cols; i += warps) {
    double sw = 0, sb = 0;
    for (int c = lane; c < chunks; c += 32) {
      sw += partial[(2 * (i64)c) * cols + i];
      sb += partial[(2 * (i64)c + 1) * cols + i];
    }
    sw = warp_reduce(sw, SumOp());
    sb = warp_reduce(sb, SumOp());
    if (lane == 0) {
      if (dw) dw[i] = (T)sw;
      if (db) db[i] = (T)sb;
    }
  }
}

#define LAYERNORM_KERNELS(sfx, T)                                                                          \
  extern "C" __global__ void __launch_bounds__(256) layernorm_##sfx(                                       \
      T* y, T* mean, T* rstd, const T* x, const T* w, const T* b, i64 rows, i64 cols, double eps) {         \
    layernorm<T, T>(y, mean, rstd, x, w, b, rows, cols, eps);                                              \
  }                                                                                                        \
  extern "C" __global__ void __launch_bounds__(256) layernorm_backward_dx_##sfx(                           \
      T* dx, const T* dy, const T* x, const T* mean, const T* rstd, const T* w, i64 rows, i64 cols) {      \
    layernorm_backward_dx<T>(dx, dy, x, mean, rstd, w, rows, cols);                                        \
  }                                                                                                        \
  extern "C" __global__ void __launch_bounds__(256) layernorm_dwdb_partial_##sfx(                          \
      double* partial, const T* dy, const T* x, const T* mean, const T* rstd, i64 rows, i64 cols,          \
      i64 rowsPerChunk) {                                                                                  \
    layernorm_dwdb_partial<T>(partial, dy, x, mean, rstd, rows, cols, rowsPerChunk);                       \
  }                                                                                                        \
  extern "C" __global__ void __launch_bounds__(256)                                                        \
      layernorm_dwdb_final_##sfx(T* dw, T* db, const double* partial, i64 cols, int chunks) {              \
    layernorm_dwdb_final<T>(dw, db, partial, cols, chunks);                                                \
  }

LAYERNORM_KERNELS(f32, float)
LAYERNORM_KERNELS(f64, double)

extern "C" __global__ void __launch_bounds__(256) layernorm_to_f32_f16(
    F16* y, float* mean, float* rstd, const float* x, const float* w, const float* b, i64 rows, i64 cols, double eps) {
  layernorm<float, F16>(y, mean, rstd, x, w, b, rows, cols, eps);
}
extern "C" __global__ void __launch_bounds__(256) layernorm_to_f32_bf16(
    BF16* y, float* mean, float* rstd, const float* x, const float* w, const float* b, i64 rows, i64 cols, double eps) {
  layernorm<float, BF16>(y, mean, rstd, x, w, b, rows, cols, eps);
}
