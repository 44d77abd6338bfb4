// dropout.cuh: dropout with the counter-based Philox4x32-10 generator, bit
// for bit the mask of cpukern.Dropout (cpukern/philox.go, dropout.go):
// element i of a call with (seed, offset) has stream position
// n = offset + i (mod 2^64); its 32 random bits are word n mod 4 of
// Philox4x32-10(counter (lo32(n/4), hi32(n/4), 0, 0), key (lo32(seed),
// hi32(seed))), which is also what curand() returns after
// curand_init(seed, 0, n). The element is kept iff bits >= thr with
// thr = ceil(p 2^32), and values are multiplied by their mask already
// scaled, scale = 1/(1-p) rounded to T or 0, as PyTorch multiplies them (a
// dropped NaN or infinity gives NaN, a dropped negative -0, a dropped
// finite value 0 even where its scaled value would overflow). One thread
// computes one Philox block: four elements.
#pragma once
#include "common.cuh"

#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u
#define PHILOX_W1 0xBB67AE85u

__device__ __forceinline__ uint4 philox4x32_10(uint4 c, unsigned int k0, unsigned int k1) {
#pragma unroll
  for (int r = 0; r < 10; r++) {
    if (r > 0) {
      k0 += PHILOX_W0;
      k1 += PHILOX_W1;
    }
    unsigned int hi0 = __umulhi(PHILOX_M0, c.x), lo0 = PHILOX_M0 * c.x;
    unsigned int hi1 = __umulhi(PHILOX_M1, c.z), lo1 = PHILOX_M1 * c.z;
    c = make_uint4(hi1 ^ c.y ^ k0, lo1, hi0 ^ c.w ^ k1, lo0);
  }
  return c;
}

template <typename T>
__device__ __forceinline__ void dropout(T* dst, const T* src, i64 n, u64 seed, u64 offset, u64 thr, T scale) {
  const i64 groups = (i64)(((offset & 3) + (u64)n + 3) >> 2);
  const unsigned int k0 = (unsigned int)seed, k1 = (unsigned int)(seed >> 32);
  FOR_N(gi, groups) {
    const u64 blk = (offset >> 2) + (u64)gi;  // block of the positions blk*4 .. blk*4+3 (mod 2^64)
    const u64 ctr = blk & ((1ull << 62) - 1);  // = (blk*4 mod 2^64) / 4
    const uint4 r = philox4x32_10(make_uint4((unsigned int)ctr, (unsigned int)(ctr >> 32), 0, 0), k0, k1);
    const unsigned int w[4] = {r.x, r.y, r.z, r.w};
#pragma unroll
    for (int l = 0; l < 4; l++) {
      const u64 i = blk * 4 + l - offset;  // element index, wrapping below 0 for the first group
      if (i < (u64)n) {
        dst[i] = src[i] * (scale * (T)((u64)w[l] >= thr));
      }
    }
  }
}

#define DROPOUT_KERNEL(sfx, T)                                                                           \
  extern "C" __global__ void __launch_bounds__(256)                                                      \
      dropout_##sfx(T* dst, const T* src, i64 n, u64 seed, u64 offset, u64 thr, T scale) {              \
    dropout<T>(dst, src, n, seed, offset, thr, scale);                                                   \
  }
DROPOUT_KERNEL(f32, float)
DROPOUT_KERNEL(f64, double)
