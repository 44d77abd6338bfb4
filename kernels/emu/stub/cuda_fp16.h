// Stand-in: see vector_types.h. The host's _Float16 rounds to nearest
// even, as __float2half_rn does.
#pragma once
struct __half {
  _Float16 v;
};
inline float __half2float(__half h) { return (float)h.v; }
inline __half __float2half_rn(float f) { return __half{(_Float16)f}; }
struct __half2 {
  __half x, y;
};
inline __half2 __floats2half2_rn(float lo, float hi) { return {__float2half_rn(lo), __float2half_rn(hi)}; }
inline __half __float2half(float f) { return __float2half_rn(f); }
