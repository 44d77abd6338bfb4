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
    if (g.rank == 0) loss[r] = (T)(((double)m - (double)x[t]) + log(s));
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

// CeMaxSum is one thread's share of a row's online max and sum of exp:
// s is the sum of exp(x - m) over the elements seen, in T (float32 for
// every logit type but float64). add4 folds a word of four logits at
// once: its max (NaN skipped) raises the running max at most once, with
// one rescale of s, then each logit adds exp(x - m). The per-element
// update this replaces rescaled in double (exp in float64) every time the
// max rose; a warp takes that branch when any of its 32 lanes does, which
// is most of the first few dozen elements of every thread's share of a
// row, and the FP64 pipe then held GPT-2's fused cross-entropy (bf16
// logits) to a third of the memory's pace (ncu: 1.73 ms a step).
// An element of -Inf adds nothing; NaN makes s NaN, and so does +Inf
// (exp(Inf - Inf)), as on the CPU (cpukern.sumExpShift).
template <typename T>
struct CeMaxSum {
  T m = (T)-INFINITY;
  T s = 0;
  __device__ __forceinline__ void raise(T wm) {
    if (wm > m) {
      s *= exp_t(m - wm);  // 0 while m is -Inf (NaN stays NaN)
      m = wm;
    }
  }
  __device__ __forceinline__ void term(T v) {
    if (!(v == (T)-INFINITY)) s += exp_t(v - m);
  }
  __device__ __forceinline__ void add(T v) {
    raise(v);  // NaN compares false: it never raises m
    term(v);
  }
  __device__ __forceinline__ void add4(const Pack<T, 4>& p) {
    const MaxSkipNaN mx;
    raise(mx(mx(p.v[0], p.v[1]), mx(p.v[2], p.v[3])));
#pragma unroll
    for (int j = 0; j < 4; j++) term(p.v[j]);
  }
};

// ce_val is a logit in the type the loss is computed in: float32 for
// float16 and bfloat16 logits (widened, exact), else the logit itself.
__device__ __forceinline__ float ce_val(float v) { return v; }
__device__ __forceinline__ double ce_val(double v) { return v; }
__device__ __forceinline__ float ce_val(F16 v) { return widen(v); }
__device__ __forceinline__ float ce_val(BF16 v) { return widen(v); }

// ce_load4 loads four logits of storage type L from x as T.
template <typename T, typename L>
__device__ __forceinline__ Pack<T, 4> ce_load4(const L* x) {
  const Pack<L, 4> p = load_pack<L, 4>(x);
  Pack<T, 4> o;
#pragma unroll
  for (int j = 0; j < 4; j++) o.v[j] = ce_val(p.v[j]);
  return o;
}

// ce_row_for_each runs f4(i, x[4i..4i+4)) over the row's words of four
// logits, the group's threads striding over them, and f1(c, x[c]) over
// the elements after the last whole word (over every element when vec is
// false or T is not float); logits of a half type L reach f4 and f1
// widened to T. Each thread has four 16-byte loads in flight before it
// runs f4 on them: with one or two blocks a multiprocessor (session 9's
// grid; three since session 15), one load at a time left the row's reads
// latency-bound at a fifth of the bandwidth. A 16-byte load holds four
// float32 logits, or eight of a half type: two words (8-byte loads of
// half logits ran at 0.9 TB/s on the H200, a third below float32's).
template <typename T, typename L, bool WARP, typename F4, typename F1>
__device__ __forceinline__ void ce_row_for_each(const RowGroup<WARP>& g, const L* x, i64 n, bool vec, F4 f4, F1 f1) {
  i64 c0 = 0;
  if (sizeof(L) == 2 && vec) {
    const i64 n8 = n / 8;
    i64 i = g.rank;
    auto run = [&](i64 w, const Pack<L, 8>& p) {
      Pack<T, 4> lo, hi;
#pragma unroll
      for (int j = 0; j < 4; j++) lo.v[j] = ce_val(p.v[j]), hi.v[j] = ce_val(p.v[4 + j]);
      f4(2 * w, lo);
      f4(2 * w + 1, hi);
    };
    for (; i + 3 * g.size < n8; i += 4 * g.size) {
      Pack<L, 8> p[4];
#pragma unroll
      for (int u = 0; u < 4; u++) p[u] = load_pack<L, 8>(x + 8 * (i + u * g.size));
#pragma unroll
      for (int u = 0; u < 4; u++) run(i + u * g.size, p[u]);
    }
    for (; i < n8; i += g.size) run(i, load_pack<L, 8>(x + 8 * i));
    c0 = 8 * n8;
  } else if (sizeof(T) == 4 && vec) {
    const i64 n4 = n / 4;
    i64 i = g.rank;
    for (; i + 3 * g.size < n4; i += 4 * g.size) {
      Pack<T, 4> p[4];
#pragma unroll
      for (int u = 0; u < 4; u++) p[u] = ce_load4<T, L>(x + 4 * (i + u * g.size));
#pragma unroll
      for (int u = 0; u < 4; u++) f4(i + u * g.size, p[u]);
    }
    for (; i < n4; i += g.size) f4(i, ce_load4<T, L>(x + 4 * i));
    c0 = 4 * n4;
  }
  for (i64 c = c0 + g.rank; c < n; c += g.size) f1(c, (T)ce_val(x[c]));
}

// ce_row_max_sumexp is row_max_sumexp in one read of the row: each thread
// keeps an online max and sum (ce_row_for_each), then the group combines
// them, rescaling each thread's sum to the row's max.
template <typename T, typename L, bool WARP>
__device__ __forceinline__ double ce_row_max_sumexp(const RowGroup<WARP>& g, const L* x, i64 n, bool vec, T* m) {
  CeMaxSum<T> a;
  ce_row_for_each<T>(
      g, x, n, vec, [&](i64, const Pack<T, 4>& p) { a.add4(p); }, [&](i64, T v) { a.add(v); });
  const T mx = g.max(a.m, shared_scratch<T>());
  double part = (double)a.s;  // 0 or NaN when the thread saw no maximum above -Inf
  if (a.m != (T)-INFINITY && mx != (T)-INFINITY) part = (double)(a.s * exp_t(a.m - mx));
  *m = mx;
  return g.sum(part, shared_scratch<double>());
}

// cross_entropy_fused is cross_entropy and cross_entropy_backward in one
// pass over the logits: each row's loss, and its gradient (softmax -
// onehot) * dloss[row] written as D, the dtype of the products that take
// it (float16 or bfloat16 under autocast, rounded as Cast rounds), so
// that a language model's head reads its float32 logits twice (once for
// the row's max and sum, once for the gradient) and never writes float32
// gradients. A bad target is reported as the forward reports it (the
// caller's next synchronization raises it); its row gets loss 0 and
// gradient 0, like the padding columns [cols, ld). Logits of a half type
// L (a half-precision head product, as PyTorch's autocast makes them)
// are widened to T = float32, in which loss and gradient are computed.
template <typename T, typename L, typename D, bool WARP>
__device__ void cross_entropy_fused(T* loss, D* dlogits, const L* logits, const int* targets, const T* dloss, i64 rows,
                                    i64 cols, i64 ld, int ignore, unsigned int* claim, Status* st) {
  RowGroup<WARP> g;
  // Whole words of four (eight for half logits, 16 bytes) on every row.
  const int w = sizeof(L) == 2 ? 8 : 4;
  const bool vec = ld % w == 0 && ((uintptr_t)logits & (16 - 1)) == 0 && aligned_for<D, 4>(dlogits);
  for (i64 r = g.row; r < rows; r += g.rowStride) {
    const int t = targets[r];
    D* d = dlogits + r * ld;
    for (i64 c = cols + g.rank; c < ld; c += g.size) store_as(d + c, (T)0);
    if (t == ignore || t < 0 || t >= cols) {
      if (g.rank == 0) {
        if (t != ignore) report(claim, st, STATUS_CE_TARGET, r, t, cols);
        loss[r] = (T)0;
      }
      for (i64 c = g.rank; c < cols; c += g.size) store_as(d + c, (T)0);
      continue;
    }
    const L* x = logits + r * ld;
    T m;
    const double s = ce_row_max_sumexp(g, x, cols, vec, &m);
    if (g.rank == 0) loss[r] = (T)(((double)m - (double)ce_val(x[t])) + log(s));
    const double gl = (double)dloss[r];
    const T scale = (T)(gl / s), gt = (T)gl;
    ce_row_for_each<T>(
        g, x, cols, vec,
        [&](i64 i, const Pack<T, 4>& p) {
          Pack<D, 4> o;
#pragma unroll
          for (int j = 0; j < 4; j++) {
            T v = exp_t(p.v[j] - m) * scale;
            if (4 * i + j == t) v -= gt;
            store_as(&o.v[j], v);
          }
          store_pack<D, 4>(d + 4 * i, o);
        },
        [&](i64 c, T xc) {
          T v = exp_t(xc - m) * scale;
          if (c == t) v -= gt;
          store_as(d + c, v);
        });
  }
}

// CE_FUSED_KERNELS(sfx, L, dsfx, D, T): logits L, gradient D, loss T.
#define CE_FUSED_KERNELS(sfx, L, dsfx, D, T)                                                                \
  extern "C" __global__ void __launch_bounds__(256) cross_entropy_fused_warp_##sfx##_##dsfx(               \
      T* loss, D* dlogits, const L* logits, const int* targets, const T* dloss, i64 rows, i64 cols, i64 ld, \
      int ignore, unsigned int* claim, Status* st) {                                                        \
    cross_entropy_fused<T, L, D, true>(loss, dlogits, logits, targets, dloss, rows, cols, ld, ignore, claim, st); \
  }                                                                                                         \
  extern "C" __global__ void __launch_bounds__(512, 3) cross_entropy_fused_block_##sfx##_##dsfx(              \
      T* loss, D* dlogits, const L* logits, const int* targets, const T* dloss, i64 rows, i64 cols, i64 ld, \
      int ignore, unsigned int* claim, Status* st) {                                                        \
    cross_entropy_fused<T, L, D, false>(loss, dlogits, logits, targets, dloss, rows, cols, ld, ignore, claim, st); \
  }

CE_FUSED_KERNELS(f32, float, f32, float, float)
CE_FUSED_KERNELS(f32, float, f16, F16, float)
CE_FUSED_KERNELS(f32, float, bf16, BF16, float)
CE_FUSED_KERNELS(f64, double, f64, double, double)
CE_FUSED_KERNELS(f16, F16, f16, F16, float)
CE_FUSED_KERNELS(bf16, BF16, bf16, BF16, float)

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
