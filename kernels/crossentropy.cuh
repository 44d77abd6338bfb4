// crossentropy.cuh: per-row cross-entropy of logits against int32
// targets, and its backward, which recomputes the softmax instead of
// keeping the probabilities (cpukern/crossentropy.go). Rows whose target
// is the ignore index get loss 0 and gradient 0. A target that is neither
// ignore nor in [0, cols) is reported through the status block; its row
// gets loss 0 and gradient 0. Rows lie ld elements apart: the first cols
// are the classes, the rest padding (a GEMM-friendly width) that the loss
// never reads and whose gradient is set to zero.
#pragma once
#include "common.cuh"

template <typename T, bool WARP>
__device__ void cross_entropy(T* loss, const T* logits, const int* targets, i64 rows, i64 cols, i64 ld,
                              int ignore, unsigned int* claim, Status* st) {
  RowGroup<WARP> g;
  for (i64 r = g.row; r < rows; r += g.rowStride) {
    const int t = targets[r];  // uniform over the group: the branches below are too
    if (t == ignore || t < 0 || t >= cols) {
      if (g.rank == 0) {
        if (t != ignore) report(claim, st, STATUS_CE_TARGET, r, t, cols);
        loss[r] = (T)0;
      }
      continue;
    }
    const T* x = logits + r * ld;
    T m;
    const double s = row_max_sumexp(g, x, cols, &m);
    if (g.rank == 0) loss[r] = (T)((double)m + log(s) - (double)x[t]);
  }
}

template <typename T, bool WARP>
__device__ void cross_entropy_backward(T* dlogits, const T* logits, const int* targets, const T* dloss, i64 rows,
                                       i64 cols, i64 ld, int ignore, unsigned int* claim, Status* st) {
  RowGroup<WARP> g;
  for (i64 r = g.row; r < rows; r += g.rowStride) {
    const int t = targets[r];
    T* d = dlogits + r * ld;
    for (i64 c = cols + g.rank; c < ld; c += g.size) d[c] = (T)0;
    if (t == ignore || t < 0 || t >= cols) {
      if (t != ignore && g.rank == 0) report(claim, st, STATUS_CE_BACKWARD_TARGET, r, t, cols);
      for (i64 c = g.rank; c < cols; c += g.size) d[c] = (T)0;
      continue;
    }
    const T* x = logits + r * ld;
    T m;
    const double s = row_max_sumexp(g, x, cols, &m);
    const double gl = (double)dloss[r];
    const T scale = (T)(gl / s), gt = (T)gl;
    for (i64 c = g.rank; c < cols; c += g.size) {
      T v = exp_t(x[c] - m) * scale;
      if (c == t) v -= gt;
      d[c] = v;
    }
  }
}

#define CE_KERNELS(sfx, T)                                                                                  \
  extern "C" __global__ void __launch_bounds__(256)                                                         \
      cross_entropy_warp_##sfx(T* loss, const T* logits, const int* targets, i64 rows, i64 cols, i64 ld, int ignore, \
                               unsigned int* claim, Status* st) {                                           \
    cross_entropy<T, true>(loss, logits, targets, rows, cols, ld, ignore, claim, st);                           \
  }                                                                                                         \
  extern "C" __global__ void __launch_bounds__(512)                                                         \
      cross_entropy_block_##sfx(T* loss, const T* logits, const int* targets, i64 rows, i64 cols, i64 ld,   \
                                int ignore, unsigned int* claim, Status* st) {                              \
    cross_entropy<T, false>(loss, logits, targets, rows, cols, ld, ignore, claim, st);                          \
  }                                                                                                         \
  extern "C" __global__ void __launch_bounds__(256) cross_entropy_backward_warp_##sfx(                      \
      T* dlogits, const T* logits, const int* targets, const T* dloss, i64 rows, i64 cols, i64 ld, int ignore,      \
      unsigned int* claim, Status* st) {                                                                    \
    cross_entropy_backward<T, true>(dlogits, logits, targets, dloss, rows, cols, ld, ignore, claim, st);        \
  }                                                                                                         \
  extern "C" __global__ void __launch_bounds__(512) cross_entropy_backward_block_##sfx(                     \
      T* dlogits, const T* logits, const int* targets, const T* dloss, i64 rows, i64 cols, i64 ld, int ignore,      \
      unsigned int* claim, Status* st) {                                                                    \
    cross_entropy_backward<T, false>(dlogits, logits, targets, dloss, rows, cols, ld, ignore, claim, st);       \
  }

CE_KERNELS(f32, float)
CE_KERNELS(f64, double)
