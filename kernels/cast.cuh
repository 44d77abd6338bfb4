// cast.cuh: fill and dtype casts. Every cast reproduces the CPU backend bit
// for bit (tensor/cpu_kernels.go, internal/cpukern/cast.go, convert.go):
//
//   float16/bfloat16 -> anything   widen to float32 (exact), then as float32
//   anything -> float16/bfloat16   to float32 first (round to nearest even),
//                                  then to the half type (nearest even)
//   float <-> double <-> int32     directly: nearest even between floats,
//                                  float -> int32 truncates toward zero and
//                                  saturates, NaN giving 0
//
// Finite values and infinities go through cuda_fp16.h / cuda_bf16.h and
// the cvt.rn conversions (the same rounding as the CPU). NaNs are
// converted by hand to the bit patterns the CPU produces (x448/float16
// keeps the payload and sets the quiet bit; bfloat16 keeps the top
// payload bits and sets the quiet bit; float <-> double as x86 and arm64
// do), which the hardware conversions may canonicalise.
#pragma once
#include "common.cuh"

// Half types as their bit patterns, so loads and stores move raw bits.
struct F16 {
  uint16_t bits;
};
struct BF16 {
  uint16_t bits;
};

__device__ __forceinline__ float widen(F16 h) {
  unsigned int b = h.bits;
  if ((b & 0x7c00u) == 0x7c00u && (b & 0x3ffu) != 0) {  // NaN: keep the payload, set the quiet bit
    return __uint_as_float(((b & 0x8000u) << 16) | 0x7fc00000u | ((b & 0x3ffu) << 13));
  }
  return __half2float(__ushort_as_half((unsigned short)b));
}

__device__ __forceinline__ float widen(BF16 h) { return __uint_as_float(((unsigned int)h.bits) << 16); }

__device__ __forceinline__ F16 narrow_f16(float f) {
  unsigned int b = __float_as_uint(f);
  if ((b & 0x7fffffffu) > 0x7f800000u) {  // NaN
    return F16{(uint16_t)(((b & 0x80000000u) >> 16) | 0x7c00u | 0x0200u | ((b & 0x007fffffu) >> 13))};
  }
  return F16{__half_as_ushort(__float2half_rn(f))};
}

__device__ __forceinline__ BF16 narrow_bf16(float f) {
  unsigned int b = __float_as_uint(f);
  if ((b & 0x7fffffffu) > 0x7f800000u) {  // NaN
    return BF16{(uint16_t)((b >> 16) | 0x0040u)};
  }
  return BF16{__bfloat16_as_ushort(__float2bfloat16_rn(f))};
}

// store_as writes a float value as T, rounded as the cast kernels round:
// the output of kernels that compute in float32 and hand their result to
// half-precision products (the fused cross-entropy's gradient, unary_to).
__device__ __forceinline__ void store_as(float* p, float v) { *p = v; }
__device__ __forceinline__ void store_as(double* p, double v) { *p = v; }
__device__ __forceinline__ void store_as(F16* p, float v) { *p = narrow_f16(v); }
__device__ __forceinline__ void store_as(BF16* p, float v) { *p = narrow_bf16(v); }

// float <-> double with the NaN payloads the CPU produces (x86 cvtss2sd and
// cvtsd2ss, and arm64 fcvt, alike): the NaN is quieted, its payload
// shifted into (or truncated from) the wider mantissa. The hardware
// conversions here may return the canonical NaN instead.
__device__ __forceinline__ double f32_to_f64(float v) {
  unsigned int b = __float_as_uint(v);
  if ((b & 0x7fffffffu) > 0x7f800000u) {
    return __longlong_as_double((long long)(((u64)(b >> 31) << 63) | 0x7ff8000000000000ull | ((u64)(b & 0x7fffffu) << 29)));
  }
  return (double)v;
}

__device__ __forceinline__ float f64_to_f32(double v) {
  u64 b = (u64)__double_as_longlong(v);
  if ((b & 0x7fffffffffffffffull) > 0x7ff0000000000000ull) {
    return __uint_as_float(((unsigned int)(b >> 63) << 31) | 0x7fc00000u | (unsigned int)((b >> 29) & 0x7fffffu));
  }
  return __double2float_rn(v);
}

// Float to int32 as the CPU's Convert: truncate, saturate, NaN -> 0.
__device__ __forceinline__ int to_i32(double f) {
  if (f != f) return 0;
  if (f >= 2147483647.0) return 2147483647;
  if (f <= -2147483648.0) return (int)0x80000000;
  return (int)f;
}

// to_f32 is the first step of a cast to a half type.
__device__ __forceinline__ float to_f32(float v) { return v; }
__device__ __forceinline__ float to_f32(double v) { return f64_to_f32(v); }
__device__ __forceinline__ float to_f32(int v) { return __int2float_rn(v); }

// from_f32 is the second step of a cast from a half type.
template <typename D>
__device__ __forceinline__ D from_f32(float v);
template <>
__device__ __forceinline__ float from_f32<float>(float v) { return v; }
template <>
__device__ __forceinline__ double from_f32<double>(float v) { return f32_to_f64(v); }
template <>
__device__ __forceinline__ int from_f32<int>(float v) { return to_i32((double)v); }
template <>
__device__ __forceinline__ F16 from_f32<F16>(float v) { return narrow_f16(v); }
template <>
__device__ __forceinline__ BF16 from_f32<BF16>(float v) { return narrow_bf16(v); }

// direct converts between float, double and int32.
template <typename D>
__device__ __forceinline__ D direct(float v);
template <typename D>
__device__ __forceinline__ D direct(double v);
template <typename D>
__device__ __forceinline__ D direct(int v);
template <>
__device__ __forceinline__ double direct<double>(float v) { return f32_to_f64(v); }
template <>
__device__ __forceinline__ int direct<int>(float v) { return to_i32((double)v); }
template <>
__device__ __forceinline__ float direct<float>(double v) { return f64_to_f32(v); }
template <>
__device__ __forceinline__ int direct<int>(double v) { return to_i32(v); }
template <>
__device__ __forceinline__ float direct<float>(int v) { return __int2float_rn(v); }
template <>
__device__ __forceinline__ double direct<double>(int v) { return (double)v; }

template <typename D, typename S>
struct Cast {
  static __device__ __forceinline__ D run(S s) { return direct<D>(s); }
};
template <typename D>
struct Cast<D, F16> {
  static __device__ __forceinline__ D run(F16 s) { return from_f32<D>(widen(s)); }
};
template <typename D>
struct Cast<D, BF16> {
  static __device__ __forceinline__ D run(BF16 s) { return from_f32<D>(widen(s)); }
};
template <typename S>
struct Cast<F16, S> {
  static __device__ __forceinline__ F16 run(S s) { return narrow_f16(to_f32(s)); }
};
template <typename S>
struct Cast<BF16, S> {
  static __device__ __forceinline__ BF16 run(S s) { return narrow_bf16(to_f32(s)); }
};
template <>
struct Cast<F16, BF16> {
  static __device__ __forceinline__ F16 run(BF16 s) { return narrow_f16(widen(s)); }
};
template <>
struct Cast<BF16, F16> {
  static __device__ __forceinline__ BF16 run(F16 s) { return narrow_bf16(widen(s)); }
};

// cast_loop moves V = 16 / max(sizeof(S), sizeof(D)) elements a thread
// through aligned packs (map_vec): one 16-byte access on the wider side.
template <typename D, typename S>
__device__ __forceinline__ void cast_loop(D* dst, const S* src, i64 n) {
  constexpr int V = 16 / (sizeof(S) > sizeof(D) ? sizeof(S) : sizeof(D));
  map_vec<V>(
      n, aligned_for<D, V>(dst) && aligned_for<S, V>(src),
      [&](i64 i0) {
        Pack<S, V> x = load_pack<S, V>(src + i0);
        Pack<D, V> y;
#pragma unroll
        for (int k = 0; k < V; k++) y.v[k] = Cast<D, S>::run(x.v[k]);
        store_pack<D, V>(dst + i0, y);
      },
      [&](i64 i) { dst[i] = Cast<D, S>::run(src[i]); });
}

#define CAST_KERNEL(sn, S, dn, D)                                                            \
  extern "C" __global__ void __launch_bounds__(256) cast_##sn##_##dn(D* dst, const S* src, i64 n) { \
    cast_loop<D, S>(dst, src, n);                                                            \
  }

// Casts between equal types are plain copies on the Go side; these
// kernels exist for every ordered pair of distinct dtypes.
CAST_KERNEL(f32, float, f64, double)
CAST_KERNEL(f32, float, f16, F16)
CAST_KERNEL(f32, float, bf16, BF16)
CAST_KERNEL(f32, float, i32, int)
CAST_KERNEL(f64, double, f32, float)
CAST_KERNEL(f64, double, f16, F16)
CAST_KERNEL(f64, double, bf16, BF16)
CAST_KERNEL(f64, double, i32, int)
CAST_KERNEL(f16, F16, f32, float)
CAST_KERNEL(f16, F16, f64, double)
CAST_KERNEL(f16, F16, bf16, BF16)
CAST_KERNEL(f16, F16, i32, int)
CAST_KERNEL(bf16, BF16, f32, float)
CAST_KERNEL(bf16, BF16, f64, double)
CAST_KERNEL(bf16, BF16, f16, F16)
CAST_KERNEL(bf16, BF16, i32, int)
CAST_KERNEL(i32, int, f32, float)
CAST_KERNEL(i32, int, f64, double)
CAST_KERNEL(i32, int, f16, F16)
CAST_KERNEL(i32, int, bf16, BF16)

// fill_uN sets n elements of N bits to one bit pattern (the Go side
// converts the value to the dtype first, exactly as the CPU does).
template <typename U>
__device__ __forceinline__ void fill_loop(U* dst, i64 n, U v) {
  constexpr int V = 16 / sizeof(U);
  Pack<U, V> p;
#pragma unroll
  for (int k = 0; k < V; k++) p.v[k] = v;
  map_vec<V>(n, aligned_for<U, V>(dst), [&](i64 i0) { store_pack<U, V>(dst + i0, p); }, [&](i64 i) { dst[i] = v; });
}

#define FILL_KERNEL(name, U) \
  extern "C" __global__ void __launch_bounds__(256) name(U* dst, i64 n, U v) { fill_loop<U>(dst, n, v); }

FILL_KERNEL(fill_u16, uint16_t)
FILL_KERNEL(fill_u32, uint32_t)
FILL_KERNEL(fill_u64, u64)
