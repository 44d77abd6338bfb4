// elementwise.cuh: unary functions and their gradients, affine maps and
// broadcasting binary ops. The op codes are the enums of ops_gen.cuh,
// written from the op table (tensor/internal/ops) by go generate; the
// formulas are the CPU's (tensor/internal/cpukern/unary.go,
// unary_backward.go, binary.go), in the same order of operations.
#pragma once
#include "common.cuh"
#include "cast.cuh"
#include "ops_gen.cuh"

// GELU, tanh approximation: 0.5 x (1 + tanh u) = x sigmoid(2u),
// u = sqrt(2/pi) (x + 0.044715 x^3).
#define GELU_K 0.7978845608028654
#define GELU_C 0.044715

__device__ __forceinline__ float log_t(float x) { return logf(x); }
__device__ __forceinline__ double log_t(double x) { return log(x); }
__device__ __forceinline__ float sqrt_t(float x) { return sqrtf(x); }
__device__ __forceinline__ double sqrt_t(double x) { return sqrt(x); }
__device__ __forceinline__ float tanh_t(float x) { return tanhf(x); }
__device__ __forceinline__ double tanh_t(double x) { return tanh(x); }
__device__ __forceinline__ float abs_t(float x) { return fabsf(x); }
__device__ __forceinline__ double abs_t(double x) { return fabs(x); }

// Rounded multiply and add, never contracted into an FMA: Affine matches
// the CPU's two roundings exactly.
__device__ __forceinline__ float mul_rn(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ double mul_rn(double a, double b) { return __dmul_rn(a, b); }
__device__ __forceinline__ float add_rn(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ double add_rn(double a, double b) { return __dadd_rn(a, b); }

template <typename T>
__device__ __forceinline__ T unary_fn(int op, T x) {
  switch (op) {
    case U_NEG: return -x;
    case U_EXP: return exp_t(x);
    case U_LOG: return log_t(x);
    case U_SQRT: return sqrt_t(x);
    case U_RSQRT: return (T)1 / sqrt_t(x);  // correctly rounded sqrt, then a division, as the CPU
    case U_TANH: return tanh_t(x);
    case U_GELU: return x / ((T)1 + exp_t(-(T)(2 * GELU_K) * x * ((T)1 + (T)GELU_C * x * x)));
    case U_RELU: return x <= (T)0 ? (T)0 : x;  // NaN propagates
    case U_ABS: return abs_t(x);
    case U_SQUARE: return x * x;
    case U_RECIP: return (T)1 / x;
    case U_SIGMOID: return (T)1 / ((T)1 + exp_t(-x));
    case U_SILU: return x / ((T)1 + exp_t(-x));
  }
  return x;
}

// elem reads p[i] in the type ops compute in: float32 for a half type
// (widened, exact), else as it is.
template <typename T>
__device__ __forceinline__ T elem(const T* p, i64 i) {
  return p[i];
}
__device__ __forceinline__ float elem(const F16* p, i64 i) { return widen(p[i]); }
__device__ __forceinline__ float elem(const BF16* p, i64 i) { return widen(p[i]); }

// unary_grad returns dy * op'(x) from the saved input x or output y (the
// op table's Reads says which one each op reads), stored as X (T, or a
// half type for float32 T: read widened).
template <typename T, typename X>
__device__ __forceinline__ T unary_grad(int op, T g, const X* x, const X* y, i64 i) {
  switch (op) {
    case U_NEG: return -g;
    case U_EXP: return g * (T)elem(y, i);
    case U_LOG: return g / (T)elem(x, i);
    case U_SQRT: return g * (T)0.5 / (T)elem(y, i);
    case U_RSQRT: {
      T v = (T)elem(y, i);
      return g * (T)-0.5 * v * v * v;
    }
    case U_TANH: {
      T v = (T)elem(y, i);
      return g * ((T)1 - v * v);
    }
    case U_GELU: {
      T v = (T)elem(x, i);
      T s = (T)1 / ((T)1 + exp_t(-(T)(2 * GELU_K) * v * ((T)1 + (T)GELU_C * v * v)));
      T du = (T)GELU_K * ((T)1 + (T)(3 * GELU_C) * v * v);
      return g * (s + (T)2 * v * s * ((T)1 - s) * du);
    }
    case U_RELU: return (T)elem(y, i) <= (T)0 ? (T)0 : g;  // a NaN y passes g, as PyTorch
    case U_ABS: {
      T v = (T)elem(x, i);
      if (v > (T)0) return g;
      if (v < (T)0) return -g;
      if (v == (T)0) return (T)0;
      return v;  // NaN input: NaN gradient
    }
    case U_SQUARE: return g * (T)2 * (T)elem(x, i);
    case U_RECIP: {
      T v = (T)elem(y, i);
      return -g * v * v;
    }
    case U_SIGMOID: {
      T v = (T)elem(y, i);
      return g * v * ((T)1 - v);
    }
    case U_SILU: {
      T v = (T)elem(x, i);
      T s = (T)1 / ((T)1 + exp_t(-v));
      return g * s * ((T)1 + v * ((T)1 - s));
    }
  }
  return g;
}

template <typename T>
__device__ __forceinline__ T binary_fn(int op, T a, T b) {
  switch (op) {
    case B_ADD: return a + b;
    case B_SUB: return a - b;
    case B_MUL: return a * b;
    case B_DIV: return a / b;
    case B_MAX: return (a > b || a != a) ? a : b;  // NaN propagates (torch.maximum)
    case B_MIN: return (a < b || a != a) ? a : b;
    case B_POW: return (T)pow((double)a, (double)b);
  }
  return a;
}

// offsets2 maps destination index i to the element offsets of a and b.
template <typename I>
__device__ __forceinline__ void offsets2(I i, const Layout2& l, i64& oa, i64& ob) {
  oa = 0;
  ob = 0;
  for (int d = l.ndim - 1; d > 0; d--) {
    I s = (I)l.shape[d];
    I q = i / s;
    i64 r = (i64)(i - q * s);
    oa += r * l.sa[d];
    ob += r * l.sb[d];
    i = q;
  }
  oa += (i64)i * l.sa[0];
  ob += (i64)i * l.sb[0];
}

// The contiguous kernels run one loop per op code (the op a template
// constant, switched on once a thread rather than once an element) with
// 16-byte accesses (map_vec). The formulas are unary_fn's and
// binary_fn's, so results are unchanged.
//
// unary_loop computes op in the source type S (float32 for a half S,
// widened: the GELU of a half-precision product) and stores it as D
// (store_as): D = S, or a half type rounded as the cast kernels round
// (unary_to: the GELU of a transformer's MLP feeds a half-precision
// product, whose float32 output and cast would be one more write and read
// of the whole activation).
template <typename S, typename D, int OP>
__device__ __forceinline__ void unary_loop(D* dst, const S* src, i64 n) {
  constexpr int V = 16 / sizeof(S);
  using C = decltype(elem(src, 0));  // the type op computes in
  map_vec<V>(
      n, aligned_for<D, V>(dst) && aligned_for<S, V>(src),
      [&](i64 i0) {
        const Pack<S, V> x = load_pack<S, V>(src + i0);
        Pack<D, V> o;
#pragma unroll
        for (int k = 0; k < V; k++) store_as(&o.v[k], unary_fn<C>(OP, elem(x.v, k)));
        store_pack<D, V>(dst + i0, o);
      },
      [&](i64 i) { store_as(dst + i, unary_fn<C>(OP, elem(src, i))); });
}

template <typename S, typename D>
__device__ __forceinline__ void unary_contig(int op, D* dst, const S* src, i64 n) {
  switch (op) {
#define UNARY_CASE(c) \
  case c:             \
    unary_loop<S, D, c>(dst, src, n); \
    return;
    UNARY_CODES(UNARY_CASE)
#undef UNARY_CASE
  }
}

extern "C" __global__ void __launch_bounds__(256) unary_to_f32_f16(int op, F16* dst, const float* src, i64 n) {
  unary_contig<float, F16>(op, dst, src, n);
}
extern "C" __global__ void __launch_bounds__(256) unary_to_f32_bf16(int op, BF16* dst, const float* src, i64 n) {
  unary_contig<float, BF16>(op, dst, src, n);
}

// unary_backward_loop: dx = unary_grad over packs of dy (x or y, whichever
// the op reads, element by element: nil for the other), stored as D: D =
// T, or a half type rounded as the cast kernels round (unary_backward_to:
// the GELU gradient of a transformer's MLP feeds only a half-precision
// product, which would cast it anyway). The saved x or y are X: T, or the
// half type for a GELU whose input was a half-precision product
// (unary_backward_half).
template <typename T, typename X, typename D, int OP>
__device__ __forceinline__ void unary_backward_loop(D* dx, const X* x, const X* y, const T* dy, i64 n) {
  constexpr int V = 16 / sizeof(T);
  map_vec<V>(
      n, aligned_for<D, V>(dx) && aligned_for<T, V>(dy),
      [&](i64 i0) {
        const Pack<T, V> g = load_pack<T, V>(dy + i0);
        Pack<D, V> o;
#pragma unroll
        for (int k = 0; k < V; k++) store_as(&o.v[k], unary_grad<T, X>(OP, g.v[k], x, y, i0 + k));
        store_pack<D, V>(dx + i0, o);
      },
      [&](i64 i) { store_as(dx + i, unary_grad<T, X>(OP, dy[i], x, y, i)); });
}

template <typename T, typename X, typename D>
__device__ __forceinline__ void unary_backward_contig(int op, D* dx, const X* x, const X* y, const T* dy, i64 n) {
  switch (op) {
#define UNARY_CASE(c) \
  case c:             \
    unary_backward_loop<T, X, D, c>(dx, x, y, dy, n); \
    return;
    UNARY_CODES(UNARY_CASE)
#undef UNARY_CASE
  }
}

extern "C" __global__ void __launch_bounds__(256)
    unary_backward_to_f32_f16(int op, F16* dx, const float* x, const float* y, const float* dy, i64 n) {
  unary_backward_contig<float, float, F16>(op, dx, x, y, dy, n);
}
extern "C" __global__ void __launch_bounds__(256)
    unary_backward_to_f32_bf16(int op, BF16* dx, const float* x, const float* y, const float* dy, i64 n) {
  unary_backward_contig<float, float, BF16>(op, dx, x, y, dy, n);
}

extern "C" __global__ void __launch_bounds__(256) unary_to_f16_f16(int op, F16* dst, const F16* src, i64 n) {
  unary_contig<F16, F16>(op, dst, src, n);
}
extern "C" __global__ void __launch_bounds__(256) unary_to_bf16_bf16(int op, BF16* dst, const BF16* src, i64 n) {
  unary_contig<BF16, BF16>(op, dst, src, n);
}

// unary_backward_half: dx (half) = dy (float32) * op'(x), x or y saved in
// the same half type (the GELU of a half-precision product).
extern "C" __global__ void __launch_bounds__(256)
    unary_backward_half_f16(int op, F16* dx, const F16* x, const F16* y, const float* dy, i64 n) {
  unary_backward_contig<float, F16, F16>(op, dx, x, y, dy, n);
}
extern "C" __global__ void __launch_bounds__(256)
    unary_backward_half_bf16(int op, BF16* dx, const BF16* x, const BF16* y, const float* dy, i64 n) {
  unary_backward_contig<float, BF16, BF16>(op, dx, x, y, dy, n);
}

template <typename T, int OP>
__device__ __forceinline__ void binary_loop(T* dst, const T* a, const T* b, i64 n) {
  constexpr int V = 16 / sizeof(T);
  map_vec<V>(
      n, aligned_for<T, V>(dst) && aligned_for<T, V>(a) && aligned_for<T, V>(b),
      [&](i64 i0) {
        Pack<T, V> x = load_pack<T, V>(a + i0), y = load_pack<T, V>(b + i0);
#pragma unroll
        for (int k = 0; k < V; k++) x.v[k] = binary_fn<T>(OP, x.v[k], y.v[k]);
        store_pack<T, V>(dst + i0, x);
      },
      [&](i64 i) { dst[i] = binary_fn<T>(OP, a[i], b[i]); });
}

template <typename T>
__device__ __forceinline__ void binary_contig(int op, T* dst, const T* a, const T* b, i64 n) {
  switch (op) {
#define BINARY_CASE(c) \
  case c:              \
    binary_loop<T, c>(dst, a, b, n); \
    return;
    BINARY_CODES(BINARY_CASE)
#undef BINARY_CASE
  }
}

// affine_loop is dst = alpha src + beta with two roundings (BETA: whether
// beta is added at all, as the CPU does).
template <typename T, bool BETA>
__device__ __forceinline__ void affine_loop(T* dst, const T* src, i64 n, T alpha, T beta) {
  constexpr int V = 16 / sizeof(T);
  auto f = [&](T x) { return BETA ? add_rn(mul_rn(alpha, x), beta) : mul_rn(alpha, x); };
  map_vec<V>(
      n, aligned_for<T, V>(dst) && aligned_for<T, V>(src),
      [&](i64 i0) {
        Pack<T, V> x = load_pack<T, V>(src + i0);
#pragma unroll
        for (int k = 0; k < V; k++) x.v[k] = f(x.v[k]);
        store_pack<T, V>(dst + i0, x);
      },
      [&](i64 i) { dst[i] = f(src[i]); });
}

// binary_rowb: dst (rows, cols) = op(x, row) with x contiguous and row a
// (cols) vector broadcast over the rows (a bias add), or op(row, x) when
// swap. 16-byte packs when cols is a multiple of the pack and every pointer
// is aligned; else one element a thread with a 64-bit remainder.
template <typename T, int OP>
__device__ __forceinline__ void binary_rowb_loop(T* dst, const T* x, const T* row, i64 n, i64 cols, bool swap) {
  constexpr int V = 16 / sizeof(T);
  auto f = [&](T a, T r) { return swap ? binary_fn<T>(OP, r, a) : binary_fn<T>(OP, a, r); };
  map_vec<V>(
      n, cols % V == 0 && aligned_for<T, V>(dst) && aligned_for<T, V>(x) && aligned_for<T, V>(row),
      [&](i64 i0) {
        Pack<T, V> a = load_pack<T, V>(x + i0), r = load_pack<T, V>(row + i0 % cols);
#pragma unroll
        for (int k = 0; k < V; k++) a.v[k] = f(a.v[k], r.v[k]);
        store_pack<T, V>(dst + i0, a);
      },
      [&](i64 i) { dst[i] = f(x[i], row[i % cols]); });
}

template <typename T>
__device__ __forceinline__ void binary_rowb(int op, T* dst, const T* x, const T* row, i64 n, i64 cols, bool swap) {
  switch (op) {
#define BINARY_CASE(c) \
  case c:              \
    binary_rowb_loop<T, c>(dst, x, row, n, cols, swap); \
    return;
    BINARY_CODES(BINARY_CASE)
#undef BINARY_CASE
  }
}

#define ELEMENTWISE_KERNELS(sfx, T)                                                                       \
  extern "C" __global__ void __launch_bounds__(256) unary_##sfx(int op, T* dst, const T* src, i64 n) {   \
    unary_contig<T, T>(op, dst, src, n);                                                                    \
  }                                                                                                       \
  extern "C" __global__ void __launch_bounds__(256)                                                       \
      unary_backward_##sfx(int op, T* dx, const T* x, const T* y, const T* dy, i64 n) {                   \
    unary_backward_contig<T, T, T>(op, dx, x, y, dy, n);                                                       \
  }                                                                                                       \
  extern "C" __global__ void __launch_bounds__(256) affine_##sfx(T* dst, const T* src, i64 n, T alpha, T beta) { \
    if (beta != (T)0) {                                                                                   \
      affine_loop<T, true>(dst, src, n, alpha, beta);                                                    \
    } else {                                                                                              \
      affine_loop<T, false>(dst, src, n, alpha, beta);                                                   \
    }                                                                                                     \
  }                                                                                                       \
  extern "C" __global__ void __launch_bounds__(256) binary_##sfx(int op, T* dst, const T* a, const T* b, i64 n) { \
    binary_contig<T>(op, dst, a, b, n);                                                                  \
  }                                                                                                       \
  extern "C" __global__ void __launch_bounds__(256)                                                       \
      binary_rowb_##sfx(int op, T* dst, const T* x, const T* row, i64 n, i64 cols, int swap) {           \
    binary_rowb<T>(op, dst, x, row, n, cols, swap != 0);                                                 \
  }                                                                                                       \
  extern "C" __global__ void __launch_bounds__(256)                                                       \
      binary_strided_##sfx##_i32(int op, T* dst, const T* a, const T* b, i64 n, Layout2 l) {             \
    FOR_N(i, n) {                                                                                         \
      i64 oa, ob;                                                                                         \
      offsets2<unsigned int>((unsigned int)i, l, oa, ob);                                                \
      dst[i] = binary_fn<T>(op, a[oa], b[ob]);                                                           \
    }                                                                                                     \
  }                                                                                                       \
  extern "C" __global__ void __launch_bounds__(256)                                                       \
      binary_strided_##sfx##_i64(int op, T* dst, const T* a, const T* b, i64 n, Layout2 l) {             \
    FOR_N(i, n) {                                                                                         \
      i64 oa, ob;                                                                                         \
      offsets2<u64>((u64)i, l, oa, ob);                                                                  \
      dst[i] = binary_fn<T>(op, a[oa], b[ob]);                                                           \
    }                                                                                                     \
  }

ELEMENTWISE_KERNELS(f32, float)
ELEMENTWISE_KERNELS(f64, double)
