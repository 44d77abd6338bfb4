// attention_tf32.cuh: the fragment operations attention_mma3.cuh's kernels
// are written in, for every input type H: float16 and bfloat16 on
// attention_tc.cuh's mma.m16n8k16, and float32 on TF32 tensor cores
// (mma.m16n8k8.tf32, sm_80+), so that one kernel source serves the three.
//
// A kernel works in chunks of 16 along the reduced dimension k:
//   tc_lda   the A fragment of 16 rows x 16 k of a [row][k] tile
//            (Tc<H>::A registers: 4 of two 16-bit elements, or 8 TF32)
//   tc_ldb   the B fragments of two n-tiles (16 columns) over 16 k of a
//            tile stored [n][k] (Tc<H>::B registers)
//   tc_ldbt  the same of a tile stored [k][n]; only ever multiplied with
//            an A fragment made by tc_acc_to_a (see below)
//   tc_mma2  c0 += A B(n-tile 0), c1 += A B(n-tile 1)
//   tc_acc_to_a  two n-tiles of accumulators (16 x 16) as an A fragment
//
// Float32 (TF32): tiles stay float32 in shared memory, rows padded by 4
// (Tc<float>::PAD; 16 bytes), and every operand is rounded to TF32 (10
// mantissa bits, round to nearest, ties away: cvt.rna.tf32.f32) as it
// enters a fragment, as cuBLAS's TF32 products round theirs; accumulation,
// softmax, lse and delta stay float32. ldmatrix moves 16-bit pairs, so a
// float is one pair: a non-transposed 8x8 ldmatrix of 8 rows x 4 floats
// gives lane l row l/4, float l%4, which is exactly the TF32 layout of A
// (rows g, g+8; columns c, c+4) and of B from a [n][k] tile. A transposed
// load of 32-bit elements has no ldmatrix, and the accumulator layout
// (row g, columns 2c and 2c+1) is not the A layout (columns c and c+4):
// tc_acc_to_a keeps the accumulators where they are and permutes the
// reduced index instead (A's column c of an 8-chunk is accumulator column
// 2c, column c+4 is 2c+1), and tc_ldbt reads B's rows in the same
// permuted order (rows 2c and 2c+1 of the chunk, plain 32-bit shared
// loads: with rows HD+4 floats apart the 32 lanes hit 32 banks). The sum
// over k is the same sum in another order.
//
// Float32 in three TF32 products (tf32x3, the type tag f32x3): the same
// tiles and fragments with the operands kept as float32 bits; tc_mma2
// splits each into a TF32 head and the TF32 rounding of the rest
// (x = hi + lo to about 2^-22 relative) and accumulates lo·hi + hi·lo +
// hi·hi (the lo·lo term is below float32's roundoff), so the products
// are float32-accurate, as CUTLASS's 3xTF32 GEMMs, on tensor cores: what
// float32 attention without TF32 runs.
//
// Fragments (PTX ISA, mma.m16n8k8 .tf32), g = lane / 4, c = lane % 4:
//   A 16x8 row-major, 4 registers: (g, c), (g+8, c), (g, c+4), (g+8, c+4)
//   B 8x8 "col", 2 registers: (k c, n g), (k c+4, n g)
//   C 16x8 float: as m16n8k16's
#pragma once
#include <type_traits>
#include "attention_tc.cuh"

// The tensor-core traits of an input type: registers of an A fragment
// (16 x 16 k), of two n-tiles' B fragments (16 k), the shared-memory row
// padding in elements (16 bytes) and the elements of a 16-byte copy.
template <typename H>
struct Tc {
  static const int A = 4, B = 4, PAD = 8, E = 8;
};
template <>
struct Tc<float> {
  static const int A = 8, B = 8, PAD = 4, E = 4;
};
template <>
struct MmaType<float> {
  static __device__ __forceinline__ float from(float x) { return x; }
};
// f32x3 is a float32 in memory that the kernels multiply in three TF32
// products (see above).
struct __align__(4) f32x3 {
  float f;
};
template <>
struct Tc<f32x3> {
  static const int A = 8, B = 8, PAD = 4, E = 4;
};
template <>
struct MmaType<f32x3> {
  static __device__ __forceinline__ f32x3 from(float x) { return f32x3{x}; }
};
__device__ __forceinline__ float attn_ld(f32x3 x) { return x.f; }

#ifndef STRATA_EMU
// tf32_round rounds a float to TF32 (the low 13 bits zero), to nearest
// with ties away from zero.
__device__ __forceinline__ u32 tf32_round(float x) {
  u32 r;
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
  return r;
}
// mma_m16n8k8_tf32 accumulates c += A B for one m16n8k8 TF32 product.
__device__ __forceinline__ void mma_m16n8k8_tf32(float (&c)[4], u32 a0, u32 a1, u32 a2, u32 a3, u32 b0, u32 b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
#else
// The CPU emulation: cvt.rna on the bits (NaN and infinities kept), and
// the product from the gathered fragments with the operands' low 13 bits
// dropped, as the tensor cores read TF32.
inline u32 tf32_round(float x) {
  u32 u;
  std::memcpy(&u, &x, 4);
  if ((u & 0x7f800000u) == 0x7f800000u) return u;
  return (u + 0x1000u) & 0xffffe000u;
}
inline void mma_m16n8k8_tf32(float (&c)[4], u32 a0, u32 a1, u32 a2, u32 a3, u32 b0, u32 b1) {
  struct Frag {
    u32 a[4], b[2];
  } mine{{a0, a1, a2, a3}, {b0, b1}}, all[32];
  emu_warp_gather(mine, all);
  auto f = [](u32 x) { x &= 0xffffe000u; float v; std::memcpy(&v, &x, 4); return v; };
  float A[16][8], B[8][8];
  for (int l = 0; l < 32; l++) {
    const int g = l >> 2, q = l & 3;
    A[g][q] = f(all[l].a[0]), A[g + 8][q] = f(all[l].a[1]);
    A[g][q + 4] = f(all[l].a[2]), A[g + 8][q + 4] = f(all[l].a[3]);
    B[q][g] = f(all[l].b[0]), B[q + 4][g] = f(all[l].b[1]);
  }
  const int lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
  for (int e = 0; e < 4; e++) {
    const int r = g + 8 * (e >> 1), n = 2 * q + (e & 1);
    float s = 0;
    for (int k = 0; k < 8; k++) s += A[r][k] * B[k][n];
    c[e] += s;
  }
}
#endif

// tf32_split splits float32 bits x into hi = x rounded to TF32 and lo =
// the rest rounded to TF32.
__device__ __forceinline__ void tf32_split(u32 x, u32& hi, u32& lo) {
  const float f = __uint_as_float(x);
  hi = tf32_round(f);
  lo = tf32_round(f - __uint_as_float(hi));
}

// tc_in is how a float32 operand enters a fragment: rounded to TF32, or
// as it is for the three-product split (f32x3).
template <typename H>
__device__ __forceinline__ u32 tc_in(u32 x) {
  if constexpr (std::is_same_v<H, f32x3>) return x;
  return tf32_round(__uint_as_float(x));
}
template <typename H>
__device__ __forceinline__ u32 tc_in(float x) {
  return tc_in<H>(__float_as_uint(x));
}

template <int S, typename H>
__device__ __forceinline__ void tc_lda(u32 (&a)[Tc<H>::A], const H* sh, int r, int k) {
  if constexpr (sizeof(H) == 2) {
    ldsm_a<S>(a, sh, r, k);
  } else {
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int kh = 0; kh < 2; kh++) {
      u32 x[4];
      ldsm_x4(x, sh + (r + (lane & 7) + ((lane >> 3) & 1) * 8) * S + k + 8 * kh + (lane >> 4) * 4);
#pragma unroll
      for (int j = 0; j < 4; j++) a[4 * kh + j] = tc_in<H>(x[j]);
    }
  }
}

template <int S, typename H>
__device__ __forceinline__ void tc_ldb(u32 (&b)[Tc<H>::B], const H* sh, int n, int k) {
  if constexpr (sizeof(H) == 2) {
    ldsm_b<S>(b, sh, n, k);
  } else {  // b[4 nt + 2 kh + i]: n-tile nt, k half kh, register i
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int nt = 0; nt < 2; nt++) {
      u32 x[4];
      ldsm_x4(x, sh + (n + 8 * nt + (lane & 7)) * S + k + (lane >> 3) * 4);
#pragma unroll
      for (int j = 0; j < 4; j++) b[4 * nt + j] = tc_in<H>(x[j]);
    }
  }
}

template <int S, typename H>
__device__ __forceinline__ void tc_ldbt(u32 (&b)[Tc<H>::B], const H* sh, int n, int k) {
  if constexpr (sizeof(H) == 2) {
    ldsm_bt<S>(b, sh, n, k);
  } else {  // rows 2c and 2c+1 of each 8-row chunk: tc_acc_to_a's order
    const int lane = threadIdx.x & 31, g = lane >> 2, c = lane & 3;
#pragma unroll
    for (int nt = 0; nt < 2; nt++)
#pragma unroll
      for (int kh = 0; kh < 2; kh++) {
        const H* p = sh + (k + 8 * kh + 2 * c) * S + n + 8 * nt + g;
        b[4 * nt + 2 * kh] = tc_in<H>(attn_ld(p[0]));
        b[4 * nt + 2 * kh + 1] = tc_in<H>(attn_ld(p[S]));
      }
  }
}

template <typename H>
__device__ __forceinline__ void tc_mma2(float (&c0)[4], float (&c1)[4], const u32 (&a)[Tc<H>::A],
                                        const u32 (&b)[Tc<H>::B]) {
  if constexpr (sizeof(H) == 2) {
    mma_m16n8k16<H>(c0, reinterpret_cast<const u32(&)[4]>(a), b[0], b[1]);
    mma_m16n8k16<H>(c1, reinterpret_cast<const u32(&)[4]>(a), b[2], b[3]);
  } else if constexpr (std::is_same_v<H, float>) {
    mma_m16n8k8_tf32(c0, a[0], a[1], a[2], a[3], b[0], b[1]);
    mma_m16n8k8_tf32(c0, a[4], a[5], a[6], a[7], b[2], b[3]);
    mma_m16n8k8_tf32(c1, a[0], a[1], a[2], a[3], b[4], b[5]);
    mma_m16n8k8_tf32(c1, a[4], a[5], a[6], a[7], b[6], b[7]);
  } else {  // f32x3: lo·hi + hi·lo + hi·hi, the small terms first; split as used (registers)
#pragma unroll
    for (int kh = 0; kh < 2; kh++) {
      u32 ah[4], al[4];
#pragma unroll
      for (int i = 0; i < 4; i++) tf32_split(a[4 * kh + i], ah[i], al[i]);
#pragma unroll
      for (int nt = 0; nt < 2; nt++) {
        float(&c)[4] = nt ? c1 : c0;
        u32 bh0, bl0, bh1, bl1;
        tf32_split(b[4 * nt + 2 * kh], bh0, bl0);
        tf32_split(b[4 * nt + 2 * kh + 1], bh1, bl1);
        mma_m16n8k8_tf32(c, al[0], al[1], al[2], al[3], bh0, bh1);
        mma_m16n8k8_tf32(c, ah[0], ah[1], ah[2], ah[3], bl0, bl1);
        mma_m16n8k8_tf32(c, ah[0], ah[1], ah[2], ah[3], bh0, bh1);
      }
    }
  }
}

template <typename H>
__device__ __forceinline__ void tc_acc_to_a(u32 (&a)[Tc<H>::A], const float (&c0)[4], const float (&c1)[4]) {
  if constexpr (sizeof(H) == 2) {
    mma_acc_to_a<H>(reinterpret_cast<u32(&)[4]>(a), c0, c1);
  } else {  // A column c of each 8-chunk is accumulator column 2c, c+4 is 2c+1
    a[0] = tc_in<H>(c0[0]), a[1] = tc_in<H>(c0[2]), a[2] = tc_in<H>(c0[1]), a[3] = tc_in<H>(c0[3]);
    a[4] = tc_in<H>(c1[0]), a[5] = tc_in<H>(c1[2]), a[6] = tc_in<H>(c1[1]), a[7] = tc_in<H>(c1[3]);
  }
}

// store_h8 stores 8 elements of H (a Pack<H, 8>) at p, 16-byte aligned.
template <typename H>
__device__ __forceinline__ void store_h8(H* p, const Pack<H, 8>& x) {
  if constexpr (sizeof(H) == 2) {
    store_pack<H, 8>(p, x);
  } else {
    store_pack<H, 4>(p, Pack<H, 4>{{x.v[0], x.v[1], x.v[2], x.v[3]}});
    store_pack<H, 4>(p + 4, Pack<H, 4>{{x.v[4], x.v[5], x.v[6], x.v[7]}});
  }
}
