// softmax.cuh: row softmax and log-softmax, forward and backward, and the
// causal mask. A row is handled by a warp (short rows: attention scores)
// or by a block (vocabulary-sized rows: 50257 logits), see RowGroup. As on
// the CPU (cpukern/softmax.go), each row subtracts its maximum before exp,
// sums the exponentials in double, and a row of all -Inf, or one holding
// +Inf or NaN, comes out NaN.
//
// With mrows > 0 the rows are those of (mrows x cols) matrices under the
// causal mask (cpukern/causal_softmax.go): row i of a matrix keeps its
// first i + 1 + cols - mrows elements (mrows <= cols), the others are
// neither read nor part of the sum and come out 0 (forward and backward).
#pragma once
#include "common.cuh"

// kept_cols is the number of leading elements row r keeps: all of them
// without the causal mask (mrows == 0).
__device__ __forceinline__ i64 kept_cols(i64 r, i64 cols, i64 mrows) {
  return mrows > 0 ? r % mrows + 1 + cols - mrows : cols;
}

template <typename T, bool WARP>
__device__ void softmax_rows(T* dst, const T* src, i64 rows, i64 cols, int logMode, i64 mrows) {
  RowGroup<WARP> g;
  for (i64 r = g.row; r < rows; r += g.rowStride) {
    const T* x = src + r * cols;
    T* y = dst + r * cols;
    const i64 n = kept_cols(r, cols, mrows);
    T m;
    const double s = row_max_sumexp(g, x, n, &m);
    if (logMode) {
      const double ls = log(s);  // (x - m) - log s: m + log s would lose log s at |m| >~ 1e15
      for (i64 c = g.rank; c < n; c += g.size) y[c] = (T)(((double)x[c] - (double)m) - ls);
    } else {
      T inv = (T)(1.0 / s);
      for (i64 c = g.rank; c < n; c += g.size) y[c] = exp_t(x[c] - m) * inv;
    }
    for (i64 c = n + g.rank; c < cols; c += g.size) y[c] = logMode ? (T)-INFINITY : (T)0;
  }
}

// softmax_backward_rows: dx = y (dy - sum(dy y)) for softmax, and
// dx = dy - exp(y) sum(dy) for log-softmax (y being the forward output).
template <typename T, bool WARP>
__device__ void softmax_backward_rows(T* dx, const T* y, const T* dy, i64 rows, i64 cols, int logMode, i64 mrows) {
  RowGroup<WARP> g;
  for (i64 r = g.row; r < rows; r += g.rowStride) {
    const T *yr = y + r * cols, *gr = dy + r * cols;
    T* d = dx + r * cols;
    const i64 n = kept_cols(r, cols, mrows);
    double s = 0;
    if (logMode) {
      for (i64 c = g.rank; c < n; c += g.size) s += (double)gr[c];
    } else {
      for (i64 c = g.rank; c < n; c += g.size) s += (double)gr[c] * (double)yr[c];
    }
    T st = (T)g.sum(s, shared_scratch<double>());
    if (logMode) {
      for (i64 c = g.rank; c < n; c += g.size) d[c] = gr[c] - exp_t(yr[c]) * st;
    } else {
      for (i64 c = g.rank; c < n; c += g.size) d[c] = yr[c] * (gr[c] - st);
    }
    for (i64 c = n + g.rank; c < cols; c += g.size) d[c] = (T)0;
  }
}

// causal_mask sets element (i, j) of each rows x cols matrix to fill where
// j > i + cols - rows; dst may be src.
template <typename T>
__device__ __forceinline__ void causal_mask(T* dst, const T* src, i64 total, i64 rows, i64 cols, T fill) {
  FOR_N(idx, total) {
    i64 q = idx / cols, j = idx - q * cols, i = q % rows;
    dst[idx] = j > i + cols - rows ? fill : src[idx];
  }
}

#define SOFTMAX_KERNELS(sfx, T)                                                                           \
  extern "C" __global__ void __launch_bounds__(256)                                                       \
      softmax_warp_##sfx(T* dst, const T* src, i64 rows, i64 cols, int logMode, i64 mrows) {              \
    softmax_rows<T, true>(dst, src, rows, cols, logMode, mrows);                                          \
  }                                                                                                       \
  extern "C" __global__ void __launch_bounds__(512)                                                       \
      softmax_block_##sfx(T* dst, const T* src, i64 rows, i64 cols, int logMode, i64 mrows) {             \
    softmax_rows<T, false>(dst, src, rows, cols, logMode, mrows);                                         \
  }                                                                                                       \
  extern "C" __global__ void __launch_bounds__(256)                                                       \
      softmax_backward_warp_##sfx(T* dx, const T* y, const T* dy, i64 rows, i64 cols, int logMode,        \
                                  i64 mrows) {                                                            \
    softmax_backward_rows<T, true>(dx, y, dy, rows, cols, logMode, mrows);                                \
  }                                                                                                       \
  extern "C" __global__ void __launch_bounds__(512)                                                       \
      softmax_backward_block_##sfx(T* dx, const T* y, const T* dy, i64 rows, i64 cols, int logMode,       \
                                   i64 mrows) {                                                           \
    softmax_backward_rows<T, false>(dx, y, dy, rows, cols, logMode, mrows);                               \
  }                                                                                                       \
  extern "C" __global__ void __launch_bounds__(256)                                                       \
      causal_mask_##sfx(T* dst, const T* src, i64 total, i64 rows, i64 cols, T fill) {                    \
    causal_mask<T>(dst, src, total, rows, cols, fill);                                                    \
  }

SOFTMAX_KERNELS(f32, float)
SOFTMAX_KERNELS(f64, double)
