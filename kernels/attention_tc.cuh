// attention_tc.cuh: the tensor-core building blocks of
// attention_mma3.cuh's fused attention (float16 and bfloat16, sm_80+):
// mma.sync.m16n8k16 with float32 accumulation, ldmatrix fragment loads,
// cp.async copies into shared memory, and their CPU emulation for
// kernels/emu (STRATA_EMU), which rebuilds each from the PTX layouts and
// semantics.
//
// Operands are rounded to the input type H as the plain path's products
// under autocast round them (mma_acc_to_a turns one product's
// accumulators into the next one's A fragment: no round trip through
// shared memory); softmax, lse and delta stay float32. Tiles live in
// shared memory row-major [row][d], rows padded by 8 elements (16 bytes):
// ldmatrix reads 8 rows of 16 bytes at a stride of HD+8 elements, which
// falls on 8 distinct 4-bank groups, so fragment loads have no bank
// conflicts; ldmatrix.trans (ldsm_bt) reads a tile along its rows.
//
// Fragments (PTX ISA, mma.m16n8k16 .f16/.bf16), g = lane / 4, c = lane % 4:
//   A 16x16 row-major, 4 registers of 2: (g, 2c), (g+8, 2c), (g, 2c+8), (g+8, 2c+8)
//   B 16x8 "col": 2 registers of 2: (k 2c, n g), (k 2c+8, n g), pairs along k
//   C 16x8 float: (g, 2c), (g, 2c+1), (g+8, 2c), (g+8, 2c+1)
#pragma once
#include "attention.cuh"

typedef unsigned int u32;

template <typename H>
struct MmaType;
template <>
struct MmaType<__half> {
  static __device__ __forceinline__ __half from(float x) { return __float2half_rn(x); }
  static __device__ __forceinline__ u32 pack(float lo, float hi) {
    __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<u32*>(&h);
  }
};
template <>
struct MmaType<__nv_bfloat16> {
  static __device__ __forceinline__ __nv_bfloat16 from(float x) { return __float2bfloat16_rn(x); }
  static __device__ __forceinline__ u32 pack(float lo, float hi) {
    __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<u32*>(&h);
  }
};

// mma_m16n8k16 accumulates c += A B for one m16n8k16 product.
template <typename H>
__device__ __forceinline__ void mma_m16n8k16(float (&c)[4], const u32 (&a)[4], u32 b0, u32 b1);

#ifndef STRATA_EMU
template <>
__device__ __forceinline__ void mma_m16n8k16<__half>(float (&c)[4], const u32 (&a)[4], u32 b0, u32 b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
template <>
__device__ __forceinline__ void mma_m16n8k16<__nv_bfloat16>(float (&c)[4], const u32 (&a)[4], u32 b0, u32 b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
#else
// The CPU emulation (kernels/emu): the warp's fragments gathered, the
// 16x16 and 16x8 operands rebuilt by the layout above, the product in
// float.
template <typename H>
inline void mma_m16n8k16(float (&c)[4], const u32 (&a)[4], u32 b0, u32 b1) {
  struct Frag {
    u32 a[4], b[2];
  } mine{{a[0], a[1], a[2], a[3]}, {b0, b1}}, all[32];
  emu_warp_gather(mine, all);
  auto lo = [](u32 x) { unsigned short s = (unsigned short)(x & 0xffff); H h; std::memcpy(&h, &s, 2); return attn_ld(h); };
  auto hi = [](u32 x) { unsigned short s = (unsigned short)(x >> 16); H h; std::memcpy(&h, &s, 2); return attn_ld(h); };
  float A[16][16], B[16][8];
  for (int l = 0; l < 32; l++) {
    const int g = l >> 2, q = l & 3;
    const u32* fa = all[l].a;
    A[g][2 * q] = lo(fa[0]), A[g][2 * q + 1] = hi(fa[0]);
    A[g + 8][2 * q] = lo(fa[1]), A[g + 8][2 * q + 1] = hi(fa[1]);
    A[g][2 * q + 8] = lo(fa[2]), A[g][2 * q + 9] = hi(fa[2]);
    A[g + 8][2 * q + 8] = lo(fa[3]), A[g + 8][2 * q + 9] = hi(fa[3]);
    B[2 * q][g] = lo(all[l].b[0]), B[2 * q + 1][g] = hi(all[l].b[0]);
    B[2 * q + 8][g] = lo(all[l].b[1]), B[2 * q + 9][g] = hi(all[l].b[1]);
  }
  const int lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
  for (int e = 0; e < 4; e++) {
    const int r = g + 8 * (e >> 1), n = 2 * q + (e & 1);
    float s = 0;
    for (int k = 0; k < 16; k++) s += A[r][k] * B[k][n];
    c[e] += s;
  }
}
#endif

// mma_acc_to_a rounds the accumulators of two n-tiles (16 x 16) into an
// A fragment.
template <typename H>
__device__ __forceinline__ void mma_acc_to_a(u32 (&a)[4], const float (&c0)[4], const float (&c1)[4]) {
  a[0] = MmaType<H>::pack(c0[0], c0[1]);
  a[1] = MmaType<H>::pack(c0[2], c0[3]);
  a[2] = MmaType<H>::pack(c1[0], c1[1]);
  a[3] = MmaType<H>::pack(c1[2], c1[3]);
}

__device__ __forceinline__ float quad_max(float v) {
  v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
  return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}
__device__ __forceinline__ float quad_sum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

#define ATTN_LOG2E 1.4426950408889634f
#define ATTN_LN2 0.6931471805599453f

#ifndef STRATA_EMU
__device__ __forceinline__ u32 attn_smem(const void* p) { return (u32)__cvta_generic_to_shared(p); }
// ldsm_x4 loads four 8x8 matrices of 16-bit elements; lane l names row
// l%8 of matrix l/8; register j of lane l holds row l/4, elements
// 2(l%4) and 2(l%4)+1 of matrix j (the transpose's with .trans).
__device__ __forceinline__ void ldsm_x4(u32 (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(attn_smem(p)));
}
__device__ __forceinline__ void ldsm_x4_t(u32 (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(attn_smem(p)));
}
// cp_async16 copies 16 bytes from global to shared memory, or writes 16
// zero bytes when full is false; cp_async4 the same for 4 bytes.
__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool full) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(attn_smem(dst)), "l"(src), "r"(full ? 16 : 0));
}
__device__ __forceinline__ void cp_async4(void* dst, const void* src, bool full) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(attn_smem(dst)), "l"(src), "r"(full ? 4 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
// cp_async_wait waits until at most N of this thread's committed groups
// are in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}
#else
// The CPU emulation: ldmatrix from the warp's 32 addresses (gathered);
// cp.async deferred to the wait that retires its group, its destination
// poisoned (all ones: NaN in float16 and bfloat16) from the issue until
// then, so reading a stage before waiting for it, or copying into a
// stage that another warp still reads, shows up as NaN.
template <bool TRANS>
inline void emu_ldsm_x4(u32 (&r)[4], const void* p) {
  const unsigned short* all[32];
  emu_warp_gather((const unsigned short*)p, all);
  const int lane = threadIdx.x & 31, g = lane >> 2, c = lane & 3;
  for (int j = 0; j < 4; j++) {
    const unsigned short* const* m = all + 8 * j;  // the matrix's 8 row addresses
    unsigned short lo, hi;
    if (TRANS)
      lo = m[2 * c][g], hi = m[2 * c + 1][g];
    else
      lo = m[g][2 * c], hi = m[g][2 * c + 1];
    r[j] = (u32)lo | ((u32)hi << 16);
  }
}
inline void ldsm_x4(u32 (&r)[4], const void* p) { emu_ldsm_x4<false>(r, p); }
inline void ldsm_x4_t(u32 (&r)[4], const void* p) { emu_ldsm_x4<true>(r, p); }
struct EmuCopy {
  void* dst;
  const void* src;
  int bytes, full;
};
inline thread_local std::vector<EmuCopy> emu_open;                 // issued, not committed
inline thread_local std::vector<std::vector<EmuCopy>> emu_groups;  // committed, oldest first
inline void emu_cp_async(void* dst, const void* src, int bytes, bool full) {
  std::memset(dst, 0xff, bytes);
  emu_open.push_back({dst, src, bytes, full});
}
inline void cp_async16(void* dst, const void* src, bool full) { emu_cp_async(dst, src, 16, full); }
inline void cp_async4(void* dst, const void* src, bool full) { emu_cp_async(dst, src, 4, full); }
inline void cp_async_commit() {
  emu_groups.push_back(emu_open);
  emu_open.clear();
}
template <int N>
inline void cp_async_wait() {
  while ((int)emu_groups.size() > N) {
    for (const EmuCopy& c : emu_groups.front()) {
      if (c.full)
        std::memcpy(c.dst, c.src, c.bytes);
      else
        std::memset(c.dst, 0, c.bytes);
    }
    emu_groups.erase(emu_groups.begin());
  }
}
#endif

template <typename T>
__device__ __forceinline__ bool attn_aligned(const T* p) {
  return ((uintptr_t)p & 15) == 0;
}

// attn_head is where head h of a (bh, t, hd) operand starts, in elements:
// the heads of a pass's operands lie (bh / nh, t, nh, hd) with rows rs
// elements apart, head h at (h / nh) * t * rs + (h % nh) * hd. Contiguous
// (bh, t, hd) is nh 1, rs hd; the q, k and v of one (B, T, 3C) product
// (a token's three groups of nh heads side by side) are nh H, rs 3C, and
// an output (B, T, C) is nh H, rs C.
__device__ __forceinline__ i64 attn_head(i64 h, i64 t, int hd, int nh, int rs) {
  return (h / nh) * t * rs + (h % nh) * hd;
}

// attn_tile copies rows [r0, r0+R) of the (t, hd) matrix x, rows rs
// elements apart, into sh, [r][d] with row stride S, zero past t and hd:
// by cp.async (16 bytes a copy, the caller commits) when fast (hd == HD,
// x and rows 16-byte aligned), else element by element with plain stores.
// Row indices are computed in I, t's type: int where the caller knows a
// head's t * rs elements fit in 31 bits (x already offset to the head:
// the streamed tiles), i64 else.
template <int R, int HD, int S, int NT, typename H, typename I>
__device__ __forceinline__ void attn_tile(H* sh, const H* x, I r0, I t, int hd, I rs, bool fast) {
  if (fast) {
    constexpr int E = 16 / sizeof(H), G = HD / E;  // a copy's elements, a row's copies
#pragma unroll
    for (int i = threadIdx.x; i < R * G; i += NT) {
      const int r = i / G, c = (i - r * G) * E;
      const I row = r0 + r;
      cp_async16(sh + r * S + c, x + (row < t ? row : 0) * rs + c, row < t);
    }
    return;
  }
  for (int i = threadIdx.x; i < R * HD; i += NT) {
    const int r = i / HD, d = i - r * HD;
    const I row = r0 + r;
    sh[r * S + d] = (row < t && d < hd) ? x[row * rs + d] : MmaType<H>::from(0.f);
  }
}

// attn_tile_contig is attn_tile for a contiguous (t, hd) x (rows hd
// apart): the row stride is the constant HD on the fast path.
template <int R, int HD, int S, int NT, typename H, typename I>
__device__ __forceinline__ void attn_tile_contig(H* sh, const H* x, I r0, I t, int hd, bool fast) {
  if (fast) {
    attn_tile<R, HD, S, NT>(sh, x, r0, t, hd, (I)HD, true);
    return;
  }
  attn_tile<R, HD, S, NT>(sh, x, r0, t, hd, (I)hd, false);
}

// ldsm_a loads the A fragment of rows [r, r+16), columns [k, k+16) of a
// [row][d] tile.
template <int S, typename H>
__device__ __forceinline__ void ldsm_a(u32 (&a)[4], const H* sh, int r, int k) {
  const int lane = threadIdx.x & 31;
  ldsm_x4(a, sh + (r + (lane & 15)) * S + k + (lane >> 4) * 8);
}
// ldsm_b loads the B fragments of two n-tiles [n, n+8), [n+8, n+16) over
// k-rows [k, k+16) from a tile stored [n][k]: b[0], b[1] the first
// tile's, b[2], b[3] the second's.
template <int S, typename H>
__device__ __forceinline__ void ldsm_b(u32 (&b)[4], const H* sh, int n, int k) {
  const int lane = threadIdx.x & 31;
  ldsm_x4(b, sh + (n + (lane & 7) + (lane >> 4) * 8) * S + k + ((lane >> 3) & 1) * 8);
}
// ldsm_bt is ldsm_b for a tile stored [k][n] (ldmatrix.trans).
template <int S, typename H>
__device__ __forceinline__ void ldsm_bt(u32 (&b)[4], const H* sh, int n, int k) {
  const int lane = threadIdx.x & 31;
  ldsm_x4_t(b, sh + (k + (lane & 7) + ((lane >> 3) & 1) * 8) * S + n + (lane >> 4) * 8);
}

// attn_store2 writes the accumulator pair (x0, x1) of row row, columns
// d and d+1 of a (t, hd) float matrix with rows rs elements apart: one
// 8-byte store when wide.
__device__ __forceinline__ void attn_store2(float* y, i64 row, int d, int hd, int rs, bool wide, float x0, float x1) {
  if (wide) {
    *reinterpret_cast<float2*>(y + row * rs + d) = make_float2(x0, x1);
    return;
  }
  if (d < hd) y[row * rs + d] = x0;
  if (d + 1 < hd) y[row * rs + d + 1] = x1;
}
