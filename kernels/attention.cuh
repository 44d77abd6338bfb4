// attention.cuh: fused causal attention (FlashAttention-2), forward and
// backward, for q, k, v of (bh, t, hd) in float32, float16 or bfloat16,
// with float32 math, float32 out, lse and gradients. The same algorithm
// as the CPU's (tensor/internal/cpukern/attention.go, which explains it):
// no (t, t) matrix is ever in memory.
//
//   forward  one block per (head, tile of BR query rows), heaviest tiles
//            first: Q stays in shared memory, K and V tiles stream
//            through it; each row keeps its running max m, sum l and
//            output in registers (online softmax); writes out = o / l
//            and lse = m + log l.
//   backward two kernels, no atomics (deterministic): backward_dq, one
//            block per query tile, computes delta = rowsum(dout * out)
//            (writing it for the next kernel) and dq over the key tiles;
//            backward_dkdv, one block per key tile, computes dk and dv
//            over the query tiles at or below it. Each recomputes
//            p = exp(scale q·k - lse) and dp = dout·v for its elements.
//
// Dropout keeps probability (h, i, j) iff the Philox word of stream
// position offset + (h*t + i)*t + j is >= thr (dropout.cuh's mask of the
// (bh, t, t) probabilities, bit for bit), and scales it by dscale; thr
// is 0 without dropout.
//
// Threads: 256 per block, as a 16 x 16 grid (ty, tx). A thread owns RM
// rows (ty*RM + i) and the columns tx + 16 j of each tile it computes, so
// a row's reductions are shuffles across the 16 lanes of a half-warp.
// Tiles live in shared memory as float, transposed where a thread reads
// several rows at once (one vector load), with rows padded against bank
// conflicts; sizes per head dim hd (rounded up to HD = 16, 32, 64 or 128,
// padded with zeros) keep each kernel under the 48 KiB of static shared
// memory. These kernels run float32 inputs (and half ones on request);
// float16 and bfloat16 run the tensor-core kernels of attention_mma3.cuh,
// included at the end. kernels/emu runs both on the CPU against a float64
// reference.
#pragma once
#include "common.cuh"
#include "dropout.cuh"

#define ATTN_THREADS 256

__device__ __forceinline__ float attn_ld(float x) { return x; }
__device__ __forceinline__ float attn_ld(__half x) { return __half2float(x); }
__device__ __forceinline__ float attn_ld(__nv_bfloat16 x) { return __bfloat162float(x); }

// Tile sizes per kernel and HD (tensor/cuda_attention.go mirrors them):
// forward and backward_dq: BR query rows, BC keys per tile; backward_dkdv:
// KB keys per block, QB queries per tile.
template <int HD> struct AttnFwdCfg;
template <> struct AttnFwdCfg<16> { static const int BR = 64, BC = 64; };
template <> struct AttnFwdCfg<32> { static const int BR = 64, BC = 64; };
template <> struct AttnFwdCfg<64> { static const int BR = 64, BC = 32; };
template <> struct AttnFwdCfg<128> { static const int BR = 32, BC = 32; };
template <int HD> struct AttnDqCfg;
template <> struct AttnDqCfg<16> { static const int BR = 64, BC = 64; };
template <> struct AttnDqCfg<32> { static const int BR = 64, BC = 32; };
template <> struct AttnDqCfg<64> { static const int BR = 32, BC = 32; };
template <> struct AttnDqCfg<128> { static const int BR = 16, BC = 16; };
template <int HD> struct AttnDkvCfg;
template <> struct AttnDkvCfg<16> { static const int KB = 64, QB = 32; };
template <> struct AttnDkvCfg<32> { static const int KB = 64, QB = 32; };
template <> struct AttnDkvCfg<64> { static const int KB = 32, QB = 32; };
template <> struct AttnDkvCfg<128> { static const int KB = 16, QB = 16; };

// attn_keep: whether dropout keeps element (row, col) of head h.
__device__ __forceinline__ bool attn_keep(u64 seed, u64 offset, u64 thr, i64 h, i64 t, i64 row, i64 col) {
  const u64 n = offset + (u64)((h * t + row) * t + col);
  const u64 blk = n >> 2;
  const uint4 w = philox4x32_10(make_uint4((unsigned int)blk, (unsigned int)(blk >> 32), 0, 0), (unsigned int)seed,
                                (unsigned int)(seed >> 32));
  const unsigned int l = (unsigned int)(n & 3);
  const unsigned int word = l == 0 ? w.x : l == 1 ? w.y : l == 2 ? w.z : w.w;
  return (u64)word >= thr;
}

// Reductions over the 16 lanes of a half-warp (the threads of one ty).
__device__ __forceinline__ float attn_max16(float v) {
#pragma unroll
  for (int o = 8; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ float attn_sum16(float v) {
#pragma unroll
  for (int o = 8; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// attn_rows loads N consecutive floats (one vector load; p aligned to
// 4N bytes) and attn_store_rows stores them.
template <int N>
__device__ __forceinline__ void attn_rows(const float* p, float (&a)[N]) {
  if constexpr (N == 4) {
    const float4 x = *reinterpret_cast<const float4*>(p);
    a[0] = x.x, a[1] = x.y, a[2] = x.z, a[3] = x.w;
  } else if constexpr (N == 2) {
    const float2 x = *reinterpret_cast<const float2*>(p);
    a[0] = x.x, a[1] = x.y;
  } else {
    static_assert(N == 1, "1, 2 or 4 rows");
    a[0] = *p;
  }
}
template <int N>
__device__ __forceinline__ void attn_store_rows(float* p, const float (&a)[N]) {
  if constexpr (N == 4) {
    *reinterpret_cast<float4*>(p) = make_float4(a[0], a[1], a[2], a[3]);
  } else if constexpr (N == 2) {
    *reinterpret_cast<float2*>(p) = make_float2(a[0], a[1]);
  } else {
    *p = a[0];
  }
}

// attn_load_t stores rows [r0, r0+R) of the (t, hd) matrix x into sh
// transposed and zero-padded: sh[d*S + r] = x[r0+r][d] (0 past t or hd).
template <int R, int HD, int S, typename T>
__device__ __forceinline__ void attn_load_t(float* sh, const T* x, i64 r0, i64 t, int hd) {
  for (int i = threadIdx.x; i < R * HD; i += ATTN_THREADS) {
    const int r = i / HD, d = i - r * HD;
    const i64 row = r0 + r;
    sh[d * S + r] = (row < t && d < hd) ? attn_ld(x[row * hd + d]) : 0.f;
  }
}

template <typename T, int HD>
__device__ void attn_forward(float* out, float* lse, const T* q, const T* k, const T* v, i64 nbh, i64 t, int hd,
                             float scale, u64 seed, u64 offset, u64 thr, float dscale) {
  constexpr int BR = AttnFwdCfg<HD>::BR, BC = AttnFwdCfg<HD>::BC;
  constexpr int RM = BR / 16, CN = BC / 16, DN = HD / 16;
  constexpr int QS = BR + 4, KS = BC + 1, PS = BR + 4;
  constexpr int KV = HD * KS > BC * HD ? HD * KS : BC * HD;
  static_assert((HD * QS + KV + BC * PS) * 4 <= 48 * 1024, "static shared memory");
  __shared__ __align__(16) float sQ[HD * QS];  // Q tile, [d][r]
  __shared__ __align__(16) float sKV[KV];      // K tile [d][c], then V tile [c][d]
  __shared__ __align__(16) float sP[BC * PS];  // probabilities after dropout, [c][r]

  const int tid = threadIdx.x, ty = tid >> 4, tx = tid & 15;
  const i64 h = blockIdx.x % nbh, nq = (t + BR - 1) / BR;
  const i64 q0 = (nq - 1 - blockIdx.x / nbh) * BR;  // the longest rows first
  const i64 base = h * t * hd;
  attn_load_t<BR, HD, QS>(sQ, q + base, q0, t, hd);

  float m[RM], l[RM], o[RM][DN];
#pragma unroll
  for (int i = 0; i < RM; i++) {
    m[i] = -INFINITY, l[i] = 0.f;
#pragma unroll
    for (int dd = 0; dd < DN; dd++) o[i][dd] = 0.f;
  }
  const i64 last = min(q0 + BR, t) - 1;  // the tile's last row
  const int nk = (int)(last / BC) + 1;
  for (int kt = 0; kt < nk; kt++) {
    const i64 k0 = (i64)kt * BC;
    __syncthreads();  // the previous tile's reads of sKV and sP are done
    attn_load_t<BC, HD, KS>(sKV, k + base, k0, t, hd);
    __syncthreads();
    float s[RM][CN];
#pragma unroll
    for (int i = 0; i < RM; i++)
#pragma unroll
      for (int j = 0; j < CN; j++) s[i][j] = 0.f;
#pragma unroll 8
    for (int d = 0; d < HD; d++) {
      float a[RM], b[CN];
      attn_rows<RM>(&sQ[d * QS + ty * RM], a);
#pragma unroll
      for (int j = 0; j < CN; j++) b[j] = sKV[d * KS + tx + 16 * j];
#pragma unroll
      for (int i = 0; i < RM; i++)
#pragma unroll
        for (int j = 0; j < CN; j++) s[i][j] = fmaf(a[i], b[j], s[i][j]);
    }
#pragma unroll
    for (int i = 0; i < RM; i++) {
      const i64 row = q0 + ty * RM + i;
      float mx = m[i];
#pragma unroll
      for (int j = 0; j < CN; j++) {
        const i64 col = k0 + tx + 16 * j;
        s[i][j] = (col <= row && row < t) ? s[i][j] * scale : -INFINITY;
        mx = fmaxf(mx, s[i][j]);
      }
      mx = attn_max16(mx);
      const float ms = mx == -INFINITY ? 0.f : mx;  // a row with nothing kept yet (padding)
      const float alpha = expf(m[i] - ms);
      float sum = 0.f;
#pragma unroll
      for (int j = 0; j < CN; j++) {
        float e = expf(s[i][j] - ms);
        sum += e;
        if (thr != 0 && e != 0.f) e = attn_keep(seed, offset, thr, h, t, row, k0 + tx + 16 * j) ? e * dscale : 0.f;
        s[i][j] = e;
      }
      sum = attn_sum16(sum);
      l[i] = l[i] * alpha + sum;
      m[i] = mx;
#pragma unroll
      for (int dd = 0; dd < DN; dd++) o[i][dd] *= alpha;
    }
#pragma unroll
    for (int j = 0; j < CN; j++) {
      float col[RM];
#pragma unroll
      for (int i = 0; i < RM; i++) col[i] = s[i][j];
      attn_store_rows<RM>(&sP[(tx + 16 * j) * PS + ty * RM], col);
    }
    __syncthreads();  // every thread is done reading K
    for (int i = tid; i < BC * HD; i += ATTN_THREADS) {
      const int c = i / HD, d = i - c * HD;
      const i64 col = k0 + c;
      sKV[c * HD + d] = (col < t && d < hd) ? attn_ld(v[base + col * hd + d]) : 0.f;
    }
    __syncthreads();
#pragma unroll 4
    for (int c = 0; c < BC; c++) {
      float a[RM];
      attn_rows<RM>(&sP[c * PS + ty * RM], a);
#pragma unroll
      for (int dd = 0; dd < DN; dd++) {
        const float b = sKV[c * HD + tx + 16 * dd];
#pragma unroll
        for (int i = 0; i < RM; i++) o[i][dd] = fmaf(a[i], b, o[i][dd]);
      }
    }
  }
#pragma unroll
  for (int i = 0; i < RM; i++) {
    const i64 row = q0 + ty * RM + i;
    if (row >= t) continue;
    const float inv = 1.f / l[i];
#pragma unroll
    for (int dd = 0; dd < DN; dd++) {
      const int d = tx + 16 * dd;
      if (d < hd) out[base + row * hd + d] = o[i][dd] * inv;
    }
    if (tx == 0) lse[h * t + row] = m[i] + logf(l[i]);
  }
}

template <typename T, int HD>
__device__ void attn_backward_dq(float* dq, float* delta, const T* q, const T* k, const T* v, const float* out,
                                 const float* dout, const float* lse, i64 nbh, i64 t, int hd, float scale, u64 seed,
                                 u64 offset, u64 thr, float dscale) {
  constexpr int BR = AttnDqCfg<HD>::BR, BC = AttnDqCfg<HD>::BC;
  constexpr int RM = BR / 16, CN = BC / 16, DN = HD / 16;
  constexpr int QS = BR + 4, KS = BC + 1, SS = BR + 4;
  static_assert((2 * HD * QS + 2 * HD * KS + BC * SS + 2 * BR) * 4 <= 48 * 1024, "static shared memory");
  __shared__ __align__(16) float sQ[HD * QS];   // [d][r]
  __shared__ __align__(16) float sDO[HD * QS];  // [d][r]
  __shared__ __align__(16) float sK[HD * KS];   // [d][c]
  __shared__ __align__(16) float sV[HD * KS];   // [d][c]
  __shared__ __align__(16) float sS[BC * SS];   // ds, [c][r]
  __shared__ float sLse[BR], sDelta[BR];

  const int tid = threadIdx.x, ty = tid >> 4, tx = tid & 15, lane = tid & 31, warp = tid >> 5;
  const i64 h = blockIdx.x % nbh, nq = (t + BR - 1) / BR;
  const i64 q0 = (nq - 1 - blockIdx.x / nbh) * BR;
  const i64 base = h * t * hd;
  attn_load_t<BR, HD, QS>(sQ, q + base, q0, t, hd);
  attn_load_t<BR, HD, QS>(sDO, dout + base, q0, t, hd);
  for (int r = warp; r < BR; r += ATTN_THREADS / 32) {  // delta = rowsum(dout * out), a warp per row
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
  float rl[RM], rd[RM], g[RM][DN];
#pragma unroll
  for (int i = 0; i < RM; i++) {
    rl[i] = sLse[ty * RM + i], rd[i] = sDelta[ty * RM + i];
#pragma unroll
    for (int dd = 0; dd < DN; dd++) g[i][dd] = 0.f;
  }
  const i64 last = min(q0 + BR, t) - 1;
  const int nk = (int)(last / BC) + 1;
  for (int kt = 0; kt < nk; kt++) {
    const i64 k0 = (i64)kt * BC;
    __syncthreads();  // the previous tile's reads of sK and sS are done
    attn_load_t<BC, HD, KS>(sK, k + base, k0, t, hd);
    attn_load_t<BC, HD, KS>(sV, v + base, k0, t, hd);
    __syncthreads();
    float s[RM][CN], dp[RM][CN];
#pragma unroll
    for (int i = 0; i < RM; i++)
#pragma unroll
      for (int j = 0; j < CN; j++) s[i][j] = 0.f, dp[i][j] = 0.f;
#pragma unroll 4
    for (int d = 0; d < HD; d++) {
      float a[RM], go[RM];
      attn_rows<RM>(&sQ[d * QS + ty * RM], a);
      attn_rows<RM>(&sDO[d * QS + ty * RM], go);
#pragma unroll
      for (int j = 0; j < CN; j++) {
        const float kb = sK[d * KS + tx + 16 * j], vb = sV[d * KS + tx + 16 * j];
#pragma unroll
        for (int i = 0; i < RM; i++) {
          s[i][j] = fmaf(a[i], kb, s[i][j]);
          dp[i][j] = fmaf(go[i], vb, dp[i][j]);
        }
      }
    }
#pragma unroll
    for (int j = 0; j < CN; j++) {
      const i64 col = k0 + tx + 16 * j;
      float ds[RM];
#pragma unroll
      for (int i = 0; i < RM; i++) {
        const i64 row = q0 + ty * RM + i;
        const float p = (col <= row && row < t) ? expf(s[i][j] * scale - rl[i]) : 0.f;
        float dpd = dp[i][j];
        if (thr != 0 && p != 0.f) dpd = attn_keep(seed, offset, thr, h, t, row, col) ? dpd * dscale : 0.f;
        ds[i] = p * (dpd - rd[i]);
      }
      attn_store_rows<RM>(&sS[(tx + 16 * j) * SS + ty * RM], ds);
    }
    __syncthreads();
#pragma unroll 4
    for (int c = 0; c < BC; c++) {
      float a[RM];
      attn_rows<RM>(&sS[c * SS + ty * RM], a);
#pragma unroll
      for (int dd = 0; dd < DN; dd++) {
        const float kb = sK[(tx + 16 * dd) * KS + c];
#pragma unroll
        for (int i = 0; i < RM; i++) g[i][dd] = fmaf(a[i], kb, g[i][dd]);
      }
    }
  }
#pragma unroll
  for (int i = 0; i < RM; i++) {
    const i64 row = q0 + ty * RM + i;
    if (row >= t) continue;
#pragma unroll
    for (int dd = 0; dd < DN; dd++) {
      const int d = tx + 16 * dd;
      if (d < hd) dq[base + row * hd + d] = g[i][dd] * scale;
    }
  }
}

template <typename T, int HD>
__device__ void attn_backward_dkdv(float* dk, float* dv, const T* q, const T* k, const T* v, const float* dout,
                                   const float* lse, const float* delta, i64 nbh, i64 t, int hd, float scale, u64 seed,
                                   u64 offset, u64 thr, float dscale) {
  constexpr int KB = AttnDkvCfg<HD>::KB, QB = AttnDkvCfg<HD>::QB;
  constexpr int CM = KB / 16, RN = QB / 16, DN = HD / 16;
  constexpr int KS = KB + 4, QS = QB + 1;
  static_assert((2 * HD * KS + 2 * HD * QS + 2 * QB * KS + 2 * QB) * 4 <= 48 * 1024, "static shared memory");
  __shared__ __align__(16) float sK[HD * KS];   // [d][c]
  __shared__ __align__(16) float sV[HD * KS];   // [d][c]
  __shared__ __align__(16) float sQ[HD * QS];   // [d][r]
  __shared__ __align__(16) float sDO[HD * QS];  // [d][r]
  __shared__ __align__(16) float sPd[QB * KS];  // p after dropout, [r][c]
  __shared__ __align__(16) float sDs[QB * KS];  // ds, [r][c]
  __shared__ float sLse[QB], sDelta[QB];

  const int tid = threadIdx.x, ty = tid >> 4, tx = tid & 15;
  const i64 h = blockIdx.x % nbh;
  const i64 k0 = (blockIdx.x / nbh) * KB;  // the first key tiles have the most rows
  const i64 base = h * t * hd;
  attn_load_t<KB, HD, KS>(sK, k + base, k0, t, hd);
  attn_load_t<KB, HD, KS>(sV, v + base, k0, t, hd);
  float gk[CM][DN], gv[CM][DN];
#pragma unroll
  for (int i = 0; i < CM; i++)
#pragma unroll
    for (int dd = 0; dd < DN; dd++) gk[i][dd] = 0.f, gv[i][dd] = 0.f;
  for (i64 q0 = (k0 / QB) * QB; q0 < t; q0 += QB) {
    __syncthreads();  // the previous tile's reads of sQ, sDO, sPd and sDs are done
    attn_load_t<QB, HD, QS>(sQ, q + base, q0, t, hd);
    attn_load_t<QB, HD, QS>(sDO, dout + base, q0, t, hd);
    for (int r = tid; r < QB; r += ATTN_THREADS) {
      const i64 row = q0 + r;
      sLse[r] = row < t ? lse[h * t + row] : 0.f;
      sDelta[r] = row < t ? delta[h * t + row] : 0.f;
    }
    __syncthreads();
    float s[CM][RN], dp[CM][RN];
#pragma unroll
    for (int i = 0; i < CM; i++)
#pragma unroll
      for (int j = 0; j < RN; j++) s[i][j] = 0.f, dp[i][j] = 0.f;
#pragma unroll 4
    for (int d = 0; d < HD; d++) {
      float a[CM], av[CM];
      attn_rows<CM>(&sK[d * KS + ty * CM], a);
      attn_rows<CM>(&sV[d * KS + ty * CM], av);
#pragma unroll
      for (int j = 0; j < RN; j++) {
        const float qb = sQ[d * QS + tx + 16 * j], gb = sDO[d * QS + tx + 16 * j];
#pragma unroll
        for (int i = 0; i < CM; i++) {
          s[i][j] = fmaf(a[i], qb, s[i][j]);
          dp[i][j] = fmaf(av[i], gb, dp[i][j]);
        }
      }
    }
#pragma unroll
    for (int j = 0; j < RN; j++) {
      const int r = tx + 16 * j;
      const i64 row = q0 + r;
      float pd[CM], ds[CM];
#pragma unroll
      for (int i = 0; i < CM; i++) {
        const i64 key = k0 + ty * CM + i;
        const float p = (key <= row && row < t) ? expf(s[i][j] * scale - sLse[r]) : 0.f;
        float dpd = dp[i][j];
        pd[i] = p;
        if (thr != 0 && p != 0.f) {
          const bool kept = attn_keep(seed, offset, thr, h, t, row, key);
          pd[i] = kept ? p * dscale : 0.f;
          dpd = kept ? dpd * dscale : 0.f;
        }
        ds[i] = p * (dpd - sDelta[r]);
      }
      attn_store_rows<CM>(&sPd[r * KS + ty * CM], pd);
      attn_store_rows<CM>(&sDs[r * KS + ty * CM], ds);
    }
    __syncthreads();
#pragma unroll 4
    for (int r = 0; r < QB; r++) {
      float a[CM], b[CM];
      attn_rows<CM>(&sPd[r * KS + ty * CM], a);
      attn_rows<CM>(&sDs[r * KS + ty * CM], b);
#pragma unroll
      for (int dd = 0; dd < DN; dd++) {
        const float go = sDO[(tx + 16 * dd) * QS + r], qv = sQ[(tx + 16 * dd) * QS + r];
#pragma unroll
        for (int i = 0; i < CM; i++) {
          gv[i][dd] = fmaf(a[i], go, gv[i][dd]);
          gk[i][dd] = fmaf(b[i], qv, gk[i][dd]);
        }
      }
    }
  }
#pragma unroll
  for (int i = 0; i < CM; i++) {
    const i64 key = k0 + ty * CM + i;
    if (key >= t) continue;
#pragma unroll
    for (int dd = 0; dd < DN; dd++) {
      const int d = tx + 16 * dd;
      if (d < hd) {
        dk[base + key * hd + d] = gk[i][dd] * scale;
        dv[base + key * hd + d] = gv[i][dd];
      }
    }
  }
}

#define ATTENTION_KERNELS(sfx, T, HD)                                                                             \
  extern "C" __global__ void __launch_bounds__(ATTN_THREADS)                                                      \
      attention_forward_##sfx##_h##HD(float* out, float* lse, const T* q, const T* k, const T* v, i64 nbh, i64 t, \
                                      int hd, float scale, u64 seed, u64 offset, u64 thr, float dscale) {         \
    attn_forward<T, HD>(out, lse, q, k, v, nbh, t, hd, scale, seed, offset, thr, dscale);                         \
  }                                                                                                               \
  extern "C" __global__ void __launch_bounds__(ATTN_THREADS) attention_backward_dq_##sfx##_h##HD(                 \
      float* dq, float* delta, const T* q, const T* k, const T* v, const float* out, const float* dout,           \
      const float* lse, i64 nbh, i64 t, int hd, float scale, u64 seed, u64 offset, u64 thr, float dscale) {       \
    attn_backward_dq<T, HD>(dq, delta, q, k, v, out, dout, lse, nbh, t, hd, scale, seed, offset, thr, dscale);    \
  }                                                                                                               \
  extern "C" __global__ void __launch_bounds__(ATTN_THREADS) attention_backward_dkdv_##sfx##_h##HD(               \
      float* dk, float* dv, const T* q, const T* k, const T* v, const float* dout, const float* lse,              \
      const float* delta, i64 nbh, i64 t, int hd, float scale, u64 seed, u64 offset, u64 thr, float dscale) {     \
    attn_backward_dkdv<T, HD>(dk, dv, q, k, v, dout, lse, delta, nbh, t, hd, scale, seed, offset, thr, dscale);   \
  }

#define ATTENTION_KERNELS_ALL_HD(sfx, T) \
  ATTENTION_KERNELS(sfx, T, 16)          \
  ATTENTION_KERNELS(sfx, T, 32)          \
  ATTENTION_KERNELS(sfx, T, 64)          \
  ATTENTION_KERNELS(sfx, T, 128)

ATTENTION_KERNELS_ALL_HD(f32, float)
ATTENTION_KERNELS_ALL_HD(f16, __half)
ATTENTION_KERNELS_ALL_HD(bf16, __nv_bfloat16)

// The tensor-core kernels for float16 and bfloat16.
#include "attention_mma3.cuh"
