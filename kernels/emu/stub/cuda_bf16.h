// Stand-in: see vector_types.h. Rounds to nearest even (finite values and
// infinities; cast.cuh converts NaNs itself).
#pragma once
#include <cstring>
struct __nv_bfloat16 {
  unsigned short bits;
};
inline __nv_bfloat16 __float2bfloat16_rn(float f) {
  unsigned int u;
  std::memcpy(&u, &f, 4);
  u += 0x7fffu + ((u >> 16) & 1u);
  return __nv_bfloat16{(unsigned short)(u >> 16)};
}
inline float __bfloat162float(__nv_bfloat16 h) {
  const unsigned int u = (unsigned int)h.bits << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
struct __nv_bfloat162 {
  __nv_bfloat16 x, y;
};
inline __nv_bfloat162 __floats2bfloat162_rn(float lo, float hi) { return {__float2bfloat16_rn(lo), __float2bfloat16_rn(hi)}; }
inline __nv_bfloat16 __float2bfloat16(float f) { return __float2bfloat16_rn(f); }
