// attention_mma.cuh: the fused attention kernels of attention.cuh on
// tensor cores, for float16 and bfloat16 inputs (sm_80+):
// mma.sync.m16n8k16 with float32 accumulation. The algorithm, the tiles'
// meaning, the dropout mask and the three passes are attention.cuh's; the
// products are tensor-core ones, and their operands are rounded to the
// input type as the plain path's products under autocast round them: the
// probabilities before P V, the output gradient before dout Vᵀ and
// Pᵀ dout, ds before ds K and dsᵀ Q. Softmax, lse and delta stay float32.
//
// A block is 4 warps; a warp owns 16 rows of the block's 64 (query rows
// in forward and backward_dq, keys in backward_dkdv) and keeps their
// A fragments (q, or k and v, or dout) in registers for the whole
// kernel. The other operand streams through shared memory as tiles of
// the input type, stored row-major [row][d] where the product reads it
// along d, and transposed [d][row] where it reads it along rows, with
// rows padded by 8 elements (16 bytes) so the fragment loads hit 32
// distinct banks. A product's result, in the accumulator layout, is the
// next product's A fragment once rounded (FlashAttention-2's register
// reuse): no round trip through shared memory.
//
// Fragments (PTX ISA, mma.m16n8k16 .f16/.bf16), g = lane / 4, c = lane % 4:
//   A 16x16 row-major, 4 registers of 2: (g, 2c), (g+8, 2c), (g, 2c+8), (g+8, 2c+8)
//   B 16x8 "col": 2 registers of 2: (k 2c, n g), (k 2c+8, n g), pairs along k
//   C 16x8 float: (g, 2c), (g, 2c+1), (g+8, 2c), (g+8, 2c+1)
#pragma once
#include "attention.cuh"

#define ATTN_MMA_THREADS 128

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

// ld2 loads two consecutive elements (a fragment register) from shared
// memory; p is 4-byte aligned.
template <typename H>
__device__ __forceinline__ u32 ld2(const H* p) {
  return *reinterpret_cast<const u32*>(p);
}

// mma16816 accumulates c += A B for one m16n8k16 product.
template <typename H>
__device__ __forceinline__ void mma16816(float (&c)[4], const u32 (&a)[4], u32 b0, u32 b1);

#ifndef STRATA_EMU
template <>
__device__ __forceinline__ void mma16816<__half>(float (&c)[4], const u32 (&a)[4], u32 b0, u32 b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
template <>
__device__ __forceinline__ void mma16816<__nv_bfloat16>(float (&c)[4], const u32 (&a)[4], u32 b0, u32 b1) {
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
inline void mma16816(float (&c)[4], const u32 (&a)[4], u32 b0, u32 b1) {
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

// mma_a_frag loads the A fragment of rows [r, r+16) and columns
// [k, k+16) of a row-major shared tile with row stride S.
template <typename H, int S>
__device__ __forceinline__ void mma_a_frag(u32 (&a)[4], const H* sh, int r, int k) {
  const int lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
  const H* p = sh + (r + g) * S + k + 2 * q;
  a[0] = ld2(p), a[1] = ld2(p + 8 * S), a[2] = ld2(p + 8), a[3] = ld2(p + 8 * S + 8);
}

// mma_b_frag loads the B fragment for n-columns [n, n+8) and k-rows
// [k, k+16) from a shared tile stored [n][k] with row stride S (pairs
// along k are contiguous).
template <typename H, int S>
__device__ __forceinline__ void mma_b_frag(u32& b0, u32& b1, const H* sh, int n, int k) {
  const int lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
  const H* p = sh + (n + g) * S + k + 2 * q;
  b0 = ld2(p), b1 = ld2(p + 8);
}

// mma_acc_to_a rounds the accumulators of two n-tiles (16 x 16) into an
// A fragment.
template <typename H>
__device__ __forceinline__ void mma_acc_to_a(u32 (&a)[4], const float (&c0)[4], const float (&c1)[4]) {
  a[0] = MmaType<H>::pack(c0[0], c0[1]);
  a[1] = MmaType<H>::pack(c0[2], c0[3]);
  a[2] = MmaType<H>::pack(c1[0], c1[1]);
  a[3] = MmaType<H>::pack(c1[2], c1[3]);
}

// mma_load8 reads x[0..8) as H: one 16-byte load of halves, or two of
// float32 values rounded to H.
template <typename H>
__device__ __forceinline__ void mma_load8(H (&v)[8], const H* x) {
  const Pack<H, 8> p = load_pack<H, 8>(x);
#pragma unroll
  for (int j = 0; j < 8; j++) v[j] = p.v[j];
}
template <typename H>
__device__ __forceinline__ void mma_load8(H (&v)[8], const float* x) {
  const Pack<float, 4> a = load_pack<float, 4>(x), b = load_pack<float, 4>(x + 4);
#pragma unroll
  for (int j = 0; j < 4; j++) v[j] = MmaType<H>::from(a.v[j]), v[j + 4] = MmaType<H>::from(b.v[j]);
}

// mma_load stores rows [r0, r0+R) of the (t, hd) matrix x (of any float
// type) into sh as H, zero-padded, row-major [r][d] with stride S when
// TRANS is false, transposed [d][r] with stride S when it is true. When hd
// fills the tile's width and x is aligned, each thread moves groups of 8
// elements (16- or 32-byte loads, a 16-byte store into a row-major tile);
// otherwise one element at a time.
template <int R, int HD, int S, bool TRANS, typename H, typename T>
__device__ __forceinline__ void mma_load(H* sh, const T* x, i64 r0, i64 t, int hd) {
  if (hd == HD && ((uintptr_t)x & (8 * sizeof(T) - 1)) == 0) {
    constexpr int G = HD / 8;
    for (int i = threadIdx.x; i < R * G; i += ATTN_MMA_THREADS) {
      const int r = i / G, d = (i - r * G) * 8;
      const i64 row = r0 + r;
      Pack<H, 8> p;
      if (row < t) {
        mma_load8<H>(p.v, x + row * HD + d);
      } else {
#pragma unroll
        for (int j = 0; j < 8; j++) p.v[j] = MmaType<H>::from(0.f);
      }
      if (TRANS) {
#pragma unroll
        for (int j = 0; j < 8; j++) sh[(d + j) * S + r] = p.v[j];
      } else {
        store_pack<H, 8>(sh + r * S + d, p);
      }
    }
    return;
  }
  for (int i = threadIdx.x; i < R * HD; i += ATTN_MMA_THREADS) {
    const int r = i / HD, d = i - r * HD;
    const i64 row = r0 + r;
    const H v = MmaType<H>::from((row < t && d < hd) ? attn_ld(x[row * hd + d]) : 0.f);
    sh[TRANS ? d * S + r : r * S + d] = v;
  }
}

__device__ __forceinline__ float quad_max(float v) {
  v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
  return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}
__device__ __forceinline__ float quad_sum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

// Tiles: forward and backward_dq take 64 query rows a block and BC keys
// a tile; backward_dkdv 64 keys a block and QB queries a tile.
template <int HD> struct AttnMmaCfg { static const int BC = 64, QB = 64; };
template <> struct AttnMmaCfg<128> { static const int BC = 32, QB = 32; };

template <typename H, int HD>
__device__ void attn_forward_mma(float* out, float* lse, const H* q, const H* k, const H* v, i64 nbh, i64 t, int hd,
                                 float scale, u64 seed, u64 offset, u64 thr, float dscale) {
  constexpr int BR = 64, BC = 64, KD = HD / 16, NS = BC / 8, ND = HD / 8;
  constexpr int KS = HD + 8, VS = BC + 8;
  static_assert((BR * KS + HD * VS) * 2 <= 48 * 1024, "static shared memory");
  __shared__ __align__(16) H sK[BR * KS];   // the Q tile, then each K tile, [row][d]
  __shared__ __align__(16) H sVt[HD * VS];  // each V tile, [d][key]
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, qd = lane & 3;
  const i64 h = blockIdx.x % nbh, nq = (t + BR - 1) / BR;
  const i64 q0 = (nq - 1 - blockIdx.x / nbh) * BR;
  const i64 base = h * t * hd;
  mma_load<BR, HD, KS, false>(sK, q + base, q0, t, hd);
  __syncthreads();
  u32 qa[KD][4];
#pragma unroll
  for (int kd = 0; kd < KD; kd++) mma_a_frag<H, KS>(qa[kd], sK, warp * 16, kd * 16);
  const i64 rows[2] = {q0 + warp * 16 + g, q0 + warp * 16 + g + 8};
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f}, o[ND][4];
#pragma unroll
  for (int nd = 0; nd < ND; nd++) o[nd][0] = o[nd][1] = o[nd][2] = o[nd][3] = 0.f;
  const i64 last = min(q0 + BR, t) - 1;
  const int nk = (int)(last / BC) + 1;
  for (int kt = 0; kt < nk; kt++) {
    const i64 k0 = (i64)kt * BC;
    __syncthreads();  // the Q fragments and the previous tile's reads are done
    mma_load<BC, HD, KS, false>(sK, k + base, k0, t, hd);
    mma_load<BC, HD, VS, true>(sVt, v + base, k0, t, hd);
    __syncthreads();
    float s[NS][4];
#pragma unroll
    for (int n = 0; n < NS; n++) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;
#pragma unroll
    for (int kd = 0; kd < KD; kd++)
#pragma unroll
      for (int n = 0; n < NS; n++) {
        u32 b0, b1;
        mma_b_frag<H, KS>(b0, b1, sK, n * 8, kd * 16);
        mma16816<H>(s[n], qa[kd], b0, b1);
      }
    float mx[2] = {m[0], m[1]};
    // The warp's 16 rows see every key of the tile unless the tile
    // reaches past its first row (the diagonal) or the rows past t.
    const bool whole = k0 + BC - 1 <= q0 + warp * 16 && q0 + warp * 16 + 15 < t;
#pragma unroll
    for (int n = 0; n < NS; n++)
#pragma unroll
      for (int e = 0; e < 4; e++) {
        const i64 row = rows[e >> 1], col = k0 + n * 8 + 2 * qd + (e & 1);
        s[n][e] = (whole || (col <= row && row < t)) ? s[n][e] * scale : -INFINITY;
        mx[e >> 1] = fmaxf(mx[e >> 1], s[n][e]);
      }
    float ms[2], alpha[2], sum[2] = {0.f, 0.f};
#pragma unroll
    for (int i = 0; i < 2; i++) {
      mx[i] = quad_max(mx[i]);
      ms[i] = mx[i] == -INFINITY ? 0.f : mx[i];
      alpha[i] = expf(m[i] - ms[i]);
    }
#pragma unroll
    for (int n = 0; n < NS; n++)
#pragma unroll
      for (int e = 0; e < 4; e++) {
        float p = expf(s[n][e] - ms[e >> 1]);
        sum[e >> 1] += p;
        if (thr != 0 && p != 0.f)
          p = attn_keep(seed, offset, thr, h, t, rows[e >> 1], k0 + n * 8 + 2 * qd + (e & 1)) ? p * dscale : 0.f;
        s[n][e] = p;
      }
#pragma unroll
    for (int i = 0; i < 2; i++) {
      l[i] = l[i] * alpha[i] + quad_sum(sum[i]);
      m[i] = mx[i];
    }
#pragma unroll
    for (int nd = 0; nd < ND; nd++) o[nd][0] *= alpha[0], o[nd][1] *= alpha[0], o[nd][2] *= alpha[1], o[nd][3] *= alpha[1];
#pragma unroll
    for (int j = 0; j < BC / 16; j++) {
      u32 pa[4];
      mma_acc_to_a<H>(pa, s[2 * j], s[2 * j + 1]);
#pragma unroll
      for (int nd = 0; nd < ND; nd++) {
        u32 b0, b1;
        mma_b_frag<H, VS>(b0, b1, sVt, nd * 8, j * 16);
        mma16816<H>(o[nd], pa, b0, b1);
      }
    }
  }
#pragma unroll
  for (int nd = 0; nd < ND; nd++)
#pragma unroll
    for (int e = 0; e < 4; e++) {
      const i64 row = rows[e >> 1];
      const int d = nd * 8 + 2 * qd + (e & 1);
      if (row < t && d < hd) out[base + row * hd + d] = o[nd][e] / l[e >> 1];
    }
  if (qd == 0)
#pragma unroll
    for (int i = 0; i < 2; i++)
      if (rows[i] < t) lse[h * t + rows[i]] = m[i] + logf(l[i]);
}

template <typename H, int HD>
__device__ void attn_backward_dq_mma(float* dq, float* delta, const H* q, const H* k, const H* v, const float* out,
                                     const float* dout, const float* lse, i64 nbh, i64 t, int hd, float scale, u64 seed,
                                     u64 offset, u64 thr, float dscale) {
  constexpr int BR = 64, BC = AttnMmaCfg<HD>::BC, KD = HD / 16, NS = BC / 8, ND = HD / 8;
  constexpr int KS = HD + 8, TS = BC + 8, ROWS = BR > BC ? BR : BC;
  static_assert((2 * ROWS * KS + HD * TS) * 2 + 2 * BR * 4 <= 48 * 1024, "static shared memory");
  __shared__ __align__(16) H sK[ROWS * KS];  // the Q tile, then each K tile, [key][d]
  __shared__ __align__(16) H sV[ROWS * KS];  // the dout tile, then each V tile, [key][d]
  __shared__ __align__(16) H sKt[HD * TS];   // each K tile, [d][key]
  __shared__ float sLse[BR], sDelta[BR];
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, qd = lane & 3;
  const i64 h = blockIdx.x % nbh, nq = (t + BR - 1) / BR;
  const i64 q0 = (nq - 1 - blockIdx.x / nbh) * BR;
  const i64 base = h * t * hd;
  mma_load<BR, HD, KS, false>(sK, q + base, q0, t, hd);
  mma_load<BR, HD, KS, false>(sV, dout + base, q0, t, hd);
  for (int r = warp; r < BR; r += ATTN_MMA_THREADS / 32) {  // delta = rowsum(dout * out), a warp per row
    const i64 row = q0 + r;
    float acc = 0.f;
    if (row < t)
      for (int d = lane; d < hd; d += 32) acc += dout[base + row * hd + d] * out[base + row * hd + d];
    acc = warp_reduce(acc, SumOp());
    if (lane == 0) {
      sDelta[r] = acc;
      sLse[r] = row < t ? lse[h * t + row] : 0.f;
      if (row < t) delta[h * t + row] = acc;
    }
  }
  __syncthreads();
  u32 qa[KD][4], ga[KD][4];
#pragma unroll
  for (int kd = 0; kd < KD; kd++) {
    mma_a_frag<H, KS>(qa[kd], sK, warp * 16, kd * 16);
    mma_a_frag<H, KS>(ga[kd], sV, warp * 16, kd * 16);
  }
  const int lr[2] = {warp * 16 + g, warp * 16 + g + 8};
  const i64 rows[2] = {q0 + lr[0], q0 + lr[1]};
  const float rl[2] = {sLse[lr[0]], sLse[lr[1]]}, rd[2] = {sDelta[lr[0]], sDelta[lr[1]]};
  float acc[ND][4];
#pragma unroll
  for (int nd = 0; nd < ND; nd++) acc[nd][0] = acc[nd][1] = acc[nd][2] = acc[nd][3] = 0.f;
  const i64 last = min(q0 + BR, t) - 1;
  const int nk = (int)(last / BC) + 1;
  for (int kt = 0; kt < nk; kt++) {
    const i64 k0 = (i64)kt * BC;
    __syncthreads();  // the fragments and the previous tile's reads are done
    mma_load<BC, HD, KS, false>(sK, k + base, k0, t, hd);
    mma_load<BC, HD, KS, false>(sV, v + base, k0, t, hd);
    mma_load<BC, HD, TS, true>(sKt, k + base, k0, t, hd);
    __syncthreads();
    float s[NS][4], dp[NS][4];
#pragma unroll
    for (int n = 0; n < NS; n++)
#pragma unroll
      for (int e = 0; e < 4; e++) s[n][e] = dp[n][e] = 0.f;
#pragma unroll
    for (int kd = 0; kd < KD; kd++)
#pragma unroll
      for (int n = 0; n < NS; n++) {
        u32 b0, b1;
        mma_b_frag<H, KS>(b0, b1, sK, n * 8, kd * 16);
        mma16816<H>(s[n], qa[kd], b0, b1);
        mma_b_frag<H, KS>(b0, b1, sV, n * 8, kd * 16);
        mma16816<H>(dp[n], ga[kd], b0, b1);
      }
    const bool whole = k0 + BC - 1 <= q0 + warp * 16 && q0 + warp * 16 + 15 < t;  // no masked key (see forward)
#pragma unroll
    for (int n = 0; n < NS; n++)
#pragma unroll
      for (int e = 0; e < 4; e++) {
        const int i = e >> 1;
        const i64 col = k0 + n * 8 + 2 * qd + (e & 1);
        const float p = (whole || (col <= rows[i] && rows[i] < t)) ? expf(s[n][e] * scale - rl[i]) : 0.f;
        float dpd = dp[n][e];
        if (thr != 0 && p != 0.f) dpd = attn_keep(seed, offset, thr, h, t, rows[i], col) ? dpd * dscale : 0.f;
        s[n][e] = p * (dpd - rd[i]);  // ds
      }
#pragma unroll
    for (int j = 0; j < BC / 16; j++) {
      u32 da[4];
      mma_acc_to_a<H>(da, s[2 * j], s[2 * j + 1]);
#pragma unroll
      for (int nd = 0; nd < ND; nd++) {
        u32 b0, b1;
        mma_b_frag<H, TS>(b0, b1, sKt, nd * 8, j * 16);
        mma16816<H>(acc[nd], da, b0, b1);
      }
    }
  }
#pragma unroll
  for (int nd = 0; nd < ND; nd++)
#pragma unroll
    for (int e = 0; e < 4; e++) {
      const i64 row = rows[e >> 1];
      const int d = nd * 8 + 2 * qd + (e & 1);
      if (row < t && d < hd) dq[base + row * hd + d] = acc[nd][e] * scale;
    }
}

template <typename H, int HD>
__device__ void attn_backward_dkdv_mma(float* dk, float* dv, const H* q, const H* k, const H* v, const float* dout,
                                       const float* lse, const float* delta, i64 nbh, i64 t, int hd, float scale,
                                       u64 seed, u64 offset, u64 thr, float dscale) {
  constexpr int KB = 64, QB = AttnMmaCfg<HD>::QB, KD = HD / 16, NQ = QB / 8, ND = HD / 8;
  constexpr int QS = HD + 8, TS = QB + 8;
  constexpr int PART = QB * QS + HD * TS;  // a row-major tile and its transpose
  static_assert(KB * QS <= PART, "the K and V tiles are staged in the parts");
  static_assert(2 * PART * 2 + 2 * QB * 4 <= 48 * 1024, "static shared memory");
  __shared__ __align__(16) H sQ[PART];   // [query][d], then [d][query] at sQ + QB*QS
  __shared__ __align__(16) H sDO[PART];  // the same for dout
  __shared__ float sLse[QB], sDelta[QB];
  H* sQt = sQ + QB * QS;
  H* sDOt = sDO + QB * QS;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, qd = lane & 3;
  const i64 h = blockIdx.x % nbh;
  const i64 k0 = (blockIdx.x / nbh) * KB;
  const i64 base = h * t * hd;
  mma_load<KB, HD, QS, false>(sQ, k + base, k0, t, hd);  // staging: K and V tiles
  mma_load<KB, HD, QS, false>(sDO, v + base, k0, t, hd);
  __syncthreads();
  u32 ka[KD][4], va[KD][4];
#pragma unroll
  for (int kd = 0; kd < KD; kd++) {
    mma_a_frag<H, QS>(ka[kd], sQ, warp * 16, kd * 16);
    mma_a_frag<H, QS>(va[kd], sDO, warp * 16, kd * 16);
  }
  const i64 keys[2] = {k0 + warp * 16 + g, k0 + warp * 16 + g + 8};
  float gk[ND][4], gv[ND][4];
#pragma unroll
  for (int nd = 0; nd < ND; nd++)
#pragma unroll
    for (int e = 0; e < 4; e++) gk[nd][e] = gv[nd][e] = 0.f;
  for (i64 q0 = (k0 / QB) * QB; q0 < t; q0 += QB) {
    __syncthreads();  // the fragments and the previous tile's reads are done
    mma_load<QB, HD, QS, false>(sQ, q + base, q0, t, hd);
    mma_load<QB, HD, QS, false>(sDO, dout + base, q0, t, hd);
    mma_load<QB, HD, TS, true>(sQt, q + base, q0, t, hd);
    mma_load<QB, HD, TS, true>(sDOt, dout + base, q0, t, hd);
    for (int r = tid; r < QB; r += ATTN_MMA_THREADS) {
      const i64 row = q0 + r;
      sLse[r] = row < t ? lse[h * t + row] : 0.f;
      sDelta[r] = row < t ? delta[h * t + row] : 0.f;
    }
    __syncthreads();
    float s[NQ][4], dp[NQ][4];  // transposed: [key][query]
#pragma unroll
    for (int n = 0; n < NQ; n++)
#pragma unroll
      for (int e = 0; e < 4; e++) s[n][e] = dp[n][e] = 0.f;
#pragma unroll
    for (int kd = 0; kd < KD; kd++)
#pragma unroll
      for (int n = 0; n < NQ; n++) {
        u32 b0, b1;
        mma_b_frag<H, QS>(b0, b1, sQ, n * 8, kd * 16);
        mma16816<H>(s[n], ka[kd], b0, b1);
        mma_b_frag<H, QS>(b0, b1, sDO, n * 8, kd * 16);
        mma16816<H>(dp[n], va[kd], b0, b1);
      }
    // Every query row of the tile sees the warp's 16 keys unless the tile
    // starts before its last key (the diagonal) or runs past t.
    const bool whole = q0 >= k0 + warp * 16 + 15 && q0 + QB - 1 < t;
#pragma unroll
    for (int n = 0; n < NQ; n++)
#pragma unroll
      for (int e = 0; e < 4; e++) {
        const i64 key = keys[e >> 1];
        const int r = n * 8 + 2 * qd + (e & 1);
        const i64 row = q0 + r;
        const float p = (whole || (key <= row && row < t)) ? expf(s[n][e] * scale - sLse[r]) : 0.f;
        float pd = p, dpd = dp[n][e];
        if (thr != 0 && p != 0.f) {
          const bool kept = attn_keep(seed, offset, thr, h, t, row, key);
          pd = kept ? p * dscale : 0.f;
          dpd = kept ? dpd * dscale : 0.f;
        }
        s[n][e] = pd;
        dp[n][e] = p * (dpd - sDelta[r]);  // ds
      }
#pragma unroll
    for (int j = 0; j < QB / 16; j++) {
      u32 pa[4], da[4];
      mma_acc_to_a<H>(pa, s[2 * j], s[2 * j + 1]);
      mma_acc_to_a<H>(da, dp[2 * j], dp[2 * j + 1]);
#pragma unroll
      for (int nd = 0; nd < ND; nd++) {
        u32 b0, b1;
        mma_b_frag<H, TS>(b0, b1, sDOt, nd * 8, j * 16);
        mma16816<H>(gv[nd], pa, b0, b1);
        mma_b_frag<H, TS>(b0, b1, sQt, nd * 8, j * 16);
        mma16816<H>(gk[nd], da, b0, b1);
      }
    }
  }
#pragma unroll
  for (int nd = 0; nd < ND; nd++)
#pragma unroll
    for (int e = 0; e < 4; e++) {
      const i64 key = keys[e >> 1];
      const int d = nd * 8 + 2 * qd + (e & 1);
      if (key < t && d < hd) {
        dk[base + key * hd + d] = gk[nd][e] * scale;
        dv[base + key * hd + d] = gv[nd][e];
      }
    }
}

#define ATTENTION_MMA_KERNELS(sfx, H, HD)                                                                          \
  extern "C" __global__ void __launch_bounds__(ATTN_MMA_THREADS)                                                   \
      attention_forward_mma_##sfx##_h##HD(float* out, float* lse, const H* q, const H* k, const H* v, i64 nbh,     \
                                          i64 t, int hd, float scale, u64 seed, u64 offset, u64 thr, float dscale) { \
    attn_forward_mma<H, HD>(out, lse, q, k, v, nbh, t, hd, scale, seed, offset, thr, dscale);                      \
  }                                                                                                                \
  extern "C" __global__ void __launch_bounds__(ATTN_MMA_THREADS) attention_backward_dq_mma_##sfx##_h##HD(          \
      float* dq, float* delta, const H* q, const H* k, const H* v, const float* out, const float* dout,            \
      const float* lse, i64 nbh, i64 t, int hd, float scale, u64 seed, u64 offset, u64 thr, float dscale) {        \
    attn_backward_dq_mma<H, HD>(dq, delta, q, k, v, out, dout, lse, nbh, t, hd, scale, seed, offset, thr, dscale); \
  }                                                                                                                \
  extern "C" __global__ void __launch_bounds__(ATTN_MMA_THREADS) attention_backward_dkdv_mma_##sfx##_h##HD(        \
      float* dk, float* dv, const H* q, const H* k, const H* v, const float* dout, const float* lse,               \
      const float* delta, i64 nbh, i64 t, int hd, float scale, u64 seed, u64 offset, u64 thr, float dscale) {      \
    attn_backward_dkdv_mma<H, HD>(dk, dv, q, k, v, dout, lse, delta, nbh, t, hd, scale, seed, offset, thr,         \
                                  dscale);                                                                         \
  }

#define ATTENTION_MMA_KERNELS_ALL_HD(sfx, H) \
  ATTENTION_MMA_KERNELS(sfx, H, 16)          \
  ATTENTION_MMA_KERNELS(sfx, H, 32)          \
  ATTENTION_MMA_KERNELS(sfx, H, 64)          \
  ATTENTION_MMA_KERNELS(sfx, H, 128)

ATTENTION_MMA_KERNELS_ALL_HD(f16, __half)
ATTENTION_MMA_KERNELS_ALL_HD(bf16, __nv_bfloat16)
