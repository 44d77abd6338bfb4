// attention_mma2.cuh: the tensor-core fused attention of
// attention_mma.cuh, rebuilt for speed (FlashAttention-2's techniques):
// the same algorithm, passes, dropout mask and rounding (operands rounded
// to the input type H, float32 softmax, lse and delta), under the names
// attention_<pass>_mma2_<type>_h<HD>.
//
//   - Tiles live in shared memory row-major [row][d] only, rows padded by
//     8 elements (16 bytes): ldmatrix reads 8 rows of 16 bytes at a
//     stride of HD+8 elements, which falls on 8 distinct 4-bank groups,
//     so fragment loads have no bank conflicts. Where a product reads a
//     tile along its rows (V in P V, K in dS K, Q and dO in dSᵀ Q and
//     Pᵀ dO) ldmatrix.trans transposes it on the way into registers.
//   - Streamed tiles (K and V in forward and backward_dq; Q, dO, lse and
//     delta in backward_dkdv) are copied by cp.async into two stages: the
//     copy of tile j+1 runs while the tensor cores work on tile j.
//   - Every operand cp.async reads is of type H. The one float32 operand
//     that is streamed, dout in backward_dkdv, is rounded once by
//     backward_dq (which reads each dout row once anyway) into doh, a
//     (bh, t, hd) scratch of H, instead of by every key block.
//   - 4 warps (64 rows) a block at HD <= 64, 8 in forward and backward_dq
//     at HD 128 (Attn2Fwd and co. below); __launch_bounds__ caps the
//     registers so that 2 or 3 blocks fit on an SM without spilling.
//   - Softmax in base 2: scale·log2(e) is folded into one multiply and
//     exp2f replaces expf; lse is written in natural log as before.
//   - A warp skips the products of a tile whose keys all lie after its
//     rows (the causal mask), and only diagonal tiles test the mask.
//
// When hd is not the kernel's HD (zero padding) or a pointer is not
// 16-byte aligned, tiles are loaded element by element instead of by
// cp.async; the rest is the same.
#pragma once
#include "attention_mma.cuh"

#define ATTN_LOG2E 1.4426950408889634f
#define ATTN_LN2 0.6931471805599453f

#ifndef STRATA_EMU
__device__ __forceinline__ u32 attn2_smem(const void* p) { return (u32)__cvta_generic_to_shared(p); }
// ldsm_x4 loads four 8x8 matrices of 16-bit elements; lane l names row
// l%8 of matrix l/8; register j of lane l holds row l/4, elements
// 2(l%4) and 2(l%4)+1 of matrix j (the transpose's with .trans).
__device__ __forceinline__ void ldsm_x4(u32 (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(attn2_smem(p)));
}
__device__ __forceinline__ void ldsm_x4_t(u32 (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(attn2_smem(p)));
}
// cp_async16 copies 16 bytes from global to shared memory, or writes 16
// zero bytes when full is false; cp_async4 the same for 4 bytes.
__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool full) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(attn2_smem(dst)), "l"(src), "r"(full ? 16 : 0));
}
__device__ __forceinline__ void cp_async4(void* dst, const void* src, bool full) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(attn2_smem(dst)), "l"(src), "r"(full ? 4 : 0));
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
__device__ __forceinline__ bool attn2_aligned(const T* p) {
  return ((uintptr_t)p & 15) == 0;
}

// attn2_tile copies rows [r0, r0+R) of the (t, hd) matrix x into sh,
// [r][d] with row stride S, zero past t and hd: by cp.async (16 bytes a
// copy, the caller commits) when fast (hd == HD, x 16-byte aligned),
// else element by element with plain stores.
template <int R, int HD, int S, int NT, typename H>
__device__ __forceinline__ void attn2_tile(H* sh, const H* x, i64 r0, i64 t, int hd, bool fast) {
  if (fast) {
    constexpr int G = HD / 8;
#pragma unroll
    for (int i = threadIdx.x; i < R * G; i += NT) {
      const int r = i / G, c = (i - r * G) * 8;
      const i64 row = r0 + r;
      cp_async16(sh + r * S + c, x + (row < t ? row : 0) * HD + c, row < t);
    }
    return;
  }
  for (int i = threadIdx.x; i < R * HD; i += NT) {
    const int r = i / HD, d = i - r * HD;
    const i64 row = r0 + r;
    sh[r * S + d] = (row < t && d < hd) ? x[row * hd + d] : MmaType<H>::from(0.f);
  }
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

// attn2_lim is the last column of a tile starting at key k0 that row may
// see (the causal mask), -1 for rows past t.
__device__ __forceinline__ int attn2_lim(i64 row, i64 k0, i64 t) { return row < t ? (int)(row - k0) : -1; }

// attn2_store2 writes the accumulator pair (x0, x1) of row row, columns
// d and d+1 of a (t, hd) float matrix: one 8-byte store when wide.
__device__ __forceinline__ void attn2_store2(float* y, i64 row, int d, int hd, bool wide, float x0, float x1) {
  if (wide) {
    *reinterpret_cast<float2*>(y + row * hd + d) = make_float2(x0, x1);
    return;
  }
  if (d < hd) y[row * hd + d] = x0;
  if (d + 1 < hd) y[row * hd + d + 1] = x1;
}

// Tiles: W warps of 16 rows each (query rows in forward and backward_dq,
// keys in backward_dkdv), BN rows of the streamed tiles, MINB blocks an
// SM for __launch_bounds__. tensor/cuda_attention.go mirrors W.
// (The MINB chosen are the largest at which ptxas spills nothing.)
template <int HD> struct Attn2Fwd { static const int W = HD == 128 ? 8 : 4, BN = 32, MINB = HD == 128 ? 1 : 3; };
template <int HD> struct Attn2Dq { static const int W = HD == 128 ? 8 : 4, BN = 32, MINB = HD == 128 ? 1 : 2; };
// backward_dkdv at HD 128 keeps its K and V tiles in shared memory and
// reloads their fragments (RES) instead of holding 64 registers of them.
template <int HD> struct Attn2Dkv {
  static const bool RES = HD == 128;
  static const int W = RES ? 2 : 4, BN = 16, MINB = RES ? 4 : 3;
};

template <typename H, int HD>
__device__ void attn_forward_mma2(float* out, float* lse, const H* q, const H* k, const H* v, i64 nbh, i64 t, int hd,
                                  float scale, u64 seed, u64 offset, u64 thr, float dscale) {
  using C = Attn2Fwd<HD>;
  constexpr int W = C::W, NT = 32 * W, BR = 16 * W, BC = C::BN, S = HD + 8, KD = HD / 16, NS = BC / 8, ND = HD / 8;
  constexpr int STAGE = 2 * BC * S, SMEM = BR * S > 2 * STAGE ? BR * S : 2 * STAGE;
  static_assert(SMEM * 2 <= 48 * 1024, "static shared memory");
  __shared__ __align__(128) H sm[SMEM];  // the Q tile, then two stages of (K tile, V tile)
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, qd = lane & 3;
  const i64 h = blockIdx.x % nbh, nq = (t + BR - 1) / BR;
  const i64 q0 = (nq - 1 - blockIdx.x / nbh) * BR;  // the longest rows first
  const i64 base = h * t * hd;
  const bool fast = hd == HD && attn2_aligned(q) && attn2_aligned(k) && attn2_aligned(v);
  attn2_tile<BR, HD, S, NT>(sm, q + base, q0, t, hd, fast);
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();
  u32 qa[KD][4];
#pragma unroll
  for (int kd = 0; kd < KD; kd++) ldsm_a<S>(qa[kd], sm, warp * 16, kd * 16);
  __syncthreads();  // the Q tile is in registers: its space is the stages'
  const i64 last = min(q0 + BR, t) - 1;
  const int nk = (int)(last / BC) + 1;
  auto load_kv = [&](int kt) {
    H* st = sm + (kt & 1) * STAGE;
    attn2_tile<BC, HD, S, NT>(st, k + base, (i64)kt * BC, t, hd, fast);
    attn2_tile<BC, HD, S, NT>(st + BC * S, v + base, (i64)kt * BC, t, hd, fast);
    cp_async_commit();
  };
  load_kv(0);
  const float sl2 = scale * ATTN_LOG2E;
  const i64 w0 = q0 + warp * 16;  // the warp's first row
  const i64 rows[2] = {w0 + g, w0 + g + 8};
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f}, o[ND][4];  // m in log2 units
#pragma unroll
  for (int nd = 0; nd < ND; nd++) o[nd][0] = o[nd][1] = o[nd][2] = o[nd][3] = 0.f;
  for (int kt = 0; kt < nk; kt++) {
    const i64 k0 = (i64)kt * BC;
    if (kt + 1 < nk) {
      load_kv(kt + 1);
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();  // tile kt is in its stage for every thread
    const H* sK = sm + (kt & 1) * STAGE;
    const H* sV = sK + BC * S;
    if (k0 <= w0 + 15 && w0 < t) {  // else every key of the tile is masked for the warp
      float s[NS][4];
#pragma unroll
      for (int n = 0; n < NS; n++) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;
#pragma unroll
      for (int kd = 0; kd < KD; kd++)
#pragma unroll
        for (int n = 0; n < NS; n += 2) {
          u32 b[4];
          ldsm_b<S>(b, sK, n * 8, kd * 16);
          mma16816<H>(s[n], qa[kd], b[0], b[1]);
          mma16816<H>(s[n + 1], qa[kd], b[2], b[3]);
        }
      float mx[2] = {m[0], m[1]};
      const bool whole = k0 + BC - 1 <= w0 && w0 + 15 < t;
      const int lim[2] = {attn2_lim(rows[0], k0, t), attn2_lim(rows[1], k0, t)};
#pragma unroll
      for (int n = 0; n < NS; n++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
          s[n][e] = (whole || n * 8 + 2 * qd + (e & 1) <= lim[e >> 1]) ? s[n][e] * sl2 : -INFINITY;
          mx[e >> 1] = fmaxf(mx[e >> 1], s[n][e]);
        }
      float ms[2], alpha[2], sum[2] = {0.f, 0.f};
#pragma unroll
      for (int i = 0; i < 2; i++) {
        mx[i] = quad_max(mx[i]);
        ms[i] = mx[i] == -INFINITY ? 0.f : mx[i];
        alpha[i] = exp2f(m[i] - ms[i]);
      }
#pragma unroll
      for (int n = 0; n < NS; n++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
          s[n][e] = exp2f(s[n][e] - ms[e >> 1]);
          sum[e >> 1] += s[n][e];
        }
      if (thr != 0)
#pragma unroll
        for (int n = 0; n < NS; n++)
#pragma unroll
          for (int e = 0; e < 4; e++)
            if (s[n][e] != 0.f)
              s[n][e] = attn_keep(seed, offset, thr, h, t, rows[e >> 1], k0 + n * 8 + 2 * qd + (e & 1)) ? s[n][e] * dscale : 0.f;
#pragma unroll
      for (int i = 0; i < 2; i++) {
        l[i] = l[i] * alpha[i] + quad_sum(sum[i]);
        m[i] = mx[i];
      }
#pragma unroll
      for (int nd = 0; nd < ND; nd++)
        o[nd][0] *= alpha[0], o[nd][1] *= alpha[0], o[nd][2] *= alpha[1], o[nd][3] *= alpha[1];
#pragma unroll
      for (int j = 0; j < BC / 16; j++) {
        u32 pa[4];
        mma_acc_to_a<H>(pa, s[2 * j], s[2 * j + 1]);
#pragma unroll
        for (int nd = 0; nd < ND; nd += 2) {
          u32 b[4];
          ldsm_bt<S>(b, sV, nd * 8, j * 16);
          mma16816<H>(o[nd], pa, b[0], b[1]);
          mma16816<H>(o[nd + 1], pa, b[2], b[3]);
        }
      }
    }
    __syncthreads();  // every thread is done with the stage before it is refilled
  }
  const bool wide = hd == HD && ((uintptr_t)out & 7) == 0;
#pragma unroll
  for (int i = 0; i < 2; i++) {
    if (rows[i] >= t) continue;
    const float inv = 1.f / l[i];
#pragma unroll
    for (int nd = 0; nd < ND; nd++)
      attn2_store2(out + base, rows[i], nd * 8 + 2 * qd, hd, wide, o[nd][2 * i] * inv, o[nd][2 * i + 1] * inv);
    if (qd == 0) lse[h * t + rows[i]] = m[i] * ATTN_LN2 + logf(l[i]);
  }
}

// backward_dq also rounds dout to H into doh (read by backward_dkdv) and
// writes delta = rowsum(dout * out).
template <typename H, int HD>
__device__ void attn_backward_dq_mma2(float* dq, float* delta, H* doh, const H* q, const H* k, const H* v,
                                      const float* out, const float* dout, const float* lse, i64 nbh, i64 t, int hd,
                                      float scale, u64 seed, u64 offset, u64 thr, float dscale) {
  using C = Attn2Dq<HD>;
  constexpr int W = C::W, NT = 32 * W, BR = 16 * W, BC = C::BN, S = HD + 8, KD = HD / 16, NS = BC / 8, ND = HD / 8;
  constexpr int STAGE = 2 * BC * S, SMEM = BR * S > 2 * STAGE ? BR * S : 2 * STAGE;
  static_assert(SMEM * 2 + BR * 4 <= 48 * 1024, "static shared memory");
  __shared__ __align__(128) H sm[SMEM];  // the Q tile, the dout tile, then two stages of (K tile, V tile)
  __shared__ float sDelta[BR];
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, qd = lane & 3;
  const i64 h = blockIdx.x % nbh, nq = (t + BR - 1) / BR;
  const i64 q0 = (nq - 1 - blockIdx.x / nbh) * BR;
  const i64 base = h * t * hd;
  const bool fast = hd == HD && attn2_aligned(q) && attn2_aligned(k) && attn2_aligned(v);
  attn2_tile<BR, HD, S, NT>(sm, q + base, q0, t, hd, fast);
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();
  u32 qa[KD][4], ga[KD][4];
#pragma unroll
  for (int kd = 0; kd < KD; kd++) ldsm_a<S>(qa[kd], sm, warp * 16, kd * 16);
  __syncthreads();
  // The dout tile, rounded to H into sm and doh; delta.
  if (hd == HD && attn2_aligned(dout) && attn2_aligned(out) && attn2_aligned(doh)) {
    constexpr int G = HD / 8;  // a row's 8-element groups: G consecutive lanes
#pragma unroll
    for (int i = tid; i < BR * G; i += NT) {
      const int r = i / G, c = (i - r * G) * 8;
      const i64 row = q0 + r;
      Pack<H, 8> p;
      float dot = 0.f;
      if (row < t) {
        const float* go = dout + base + row * HD + c;
        const float* yo = out + base + row * HD + c;
        const Pack<float, 4> g0 = load_pack<float, 4>(go), g1 = load_pack<float, 4>(go + 4);
        const Pack<float, 4> y0 = load_pack<float, 4>(yo), y1 = load_pack<float, 4>(yo + 4);
#pragma unroll
        for (int j = 0; j < 4; j++) {
          dot += g0.v[j] * y0.v[j] + g1.v[j] * y1.v[j];
          p.v[j] = MmaType<H>::from(g0.v[j]), p.v[j + 4] = MmaType<H>::from(g1.v[j]);
        }
        store_pack<H, 8>(doh + base + row * HD + c, p);
      } else {
#pragma unroll
        for (int j = 0; j < 8; j++) p.v[j] = MmaType<H>::from(0.f);
      }
      store_pack<H, 8>(sm + r * S + c, p);
#pragma unroll
      for (int o = G / 2; o > 0; o >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, o);
      if (c == 0) sDelta[r] = dot;
    }
  } else {
    for (int i = tid; i < BR * HD; i += NT) {
      const int r = i / HD, d = i - r * HD;
      const i64 row = q0 + r;
      const H x = MmaType<H>::from((row < t && d < hd) ? dout[base + row * hd + d] : 0.f);
      sm[r * S + d] = x;
      if (row < t && d < hd) doh[base + row * hd + d] = x;
    }
    for (int r = warp; r < BR; r += W) {  // a warp per row
      const i64 row = q0 + r;
      float acc = 0.f;
      if (row < t)
        for (int d = lane; d < hd; d += 32) acc += dout[base + row * hd + d] * out[base + row * hd + d];
      acc = warp_reduce(acc, SumOp());
      if (lane == 0) sDelta[r] = acc;
    }
  }
  __syncthreads();
#pragma unroll
  for (int kd = 0; kd < KD; kd++) ldsm_a<S>(ga[kd], sm, warp * 16, kd * 16);
  const int lr[2] = {warp * 16 + g, warp * 16 + g + 8};
  const i64 w0 = q0 + warp * 16;
  const i64 rows[2] = {w0 + g, w0 + g + 8};
  const float rd[2] = {sDelta[lr[0]], sDelta[lr[1]]};
  const float rl[2] = {rows[0] < t ? lse[h * t + rows[0]] * ATTN_LOG2E : 0.f,
                       rows[1] < t ? lse[h * t + rows[1]] * ATTN_LOG2E : 0.f};
  if (qd == 0)
#pragma unroll
    for (int i = 0; i < 2; i++)
      if (rows[i] < t) delta[h * t + rows[i]] = rd[i];
  __syncthreads();  // the dout tile is in registers
  const i64 last = min(q0 + BR, t) - 1;
  const int nk = (int)(last / BC) + 1;
  auto load_kv = [&](int kt) {
    H* st = sm + (kt & 1) * STAGE;
    attn2_tile<BC, HD, S, NT>(st, k + base, (i64)kt * BC, t, hd, fast);
    attn2_tile<BC, HD, S, NT>(st + BC * S, v + base, (i64)kt * BC, t, hd, fast);
    cp_async_commit();
  };
  load_kv(0);
  const float sl2 = scale * ATTN_LOG2E;
  float acc[ND][4];
#pragma unroll
  for (int nd = 0; nd < ND; nd++) acc[nd][0] = acc[nd][1] = acc[nd][2] = acc[nd][3] = 0.f;
  for (int kt = 0; kt < nk; kt++) {
    const i64 k0 = (i64)kt * BC;
    if (kt + 1 < nk) {
      load_kv(kt + 1);
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    const H* sK = sm + (kt & 1) * STAGE;
    const H* sV = sK + BC * S;
    if (k0 <= w0 + 15 && w0 < t) {
      float s[NS][4], dp[NS][4];
#pragma unroll
      for (int n = 0; n < NS; n++)
#pragma unroll
        for (int e = 0; e < 4; e++) s[n][e] = dp[n][e] = 0.f;
#pragma unroll
      for (int kd = 0; kd < KD; kd++)
#pragma unroll
        for (int n = 0; n < NS; n += 2) {
          u32 b[4];
          ldsm_b<S>(b, sK, n * 8, kd * 16);
          mma16816<H>(s[n], qa[kd], b[0], b[1]);
          mma16816<H>(s[n + 1], qa[kd], b[2], b[3]);
          ldsm_b<S>(b, sV, n * 8, kd * 16);
          mma16816<H>(dp[n], ga[kd], b[0], b[1]);
          mma16816<H>(dp[n + 1], ga[kd], b[2], b[3]);
        }
      const bool whole = k0 + BC - 1 <= w0 && w0 + 15 < t;
      const int lim[2] = {attn2_lim(rows[0], k0, t), attn2_lim(rows[1], k0, t)};
#pragma unroll
      for (int n = 0; n < NS; n++)
#pragma unroll
        for (int e = 0; e < 4; e++)
          s[n][e] = (whole || n * 8 + 2 * qd + (e & 1) <= lim[e >> 1]) ? exp2f(s[n][e] * sl2 - rl[e >> 1]) : 0.f;
      if (thr != 0)
#pragma unroll
        for (int n = 0; n < NS; n++)
#pragma unroll
          for (int e = 0; e < 4; e++)
            if (s[n][e] != 0.f && !attn_keep(seed, offset, thr, h, t, rows[e >> 1], k0 + n * 8 + 2 * qd + (e & 1)))
              dp[n][e] = 0.f;
            else
              dp[n][e] *= dscale;
#pragma unroll
      for (int n = 0; n < NS; n++)
#pragma unroll
        for (int e = 0; e < 4; e++) s[n][e] *= dp[n][e] - rd[e >> 1];  // ds
#pragma unroll
      for (int j = 0; j < BC / 16; j++) {
        u32 da[4];
        mma_acc_to_a<H>(da, s[2 * j], s[2 * j + 1]);
#pragma unroll
        for (int nd = 0; nd < ND; nd += 2) {
          u32 b[4];
          ldsm_bt<S>(b, sK, nd * 8, j * 16);
          mma16816<H>(acc[nd], da, b[0], b[1]);
          mma16816<H>(acc[nd + 1], da, b[2], b[3]);
        }
      }
    }
    __syncthreads();
  }
  const bool wide = hd == HD && ((uintptr_t)dq & 7) == 0;
#pragma unroll
  for (int i = 0; i < 2; i++) {
    if (rows[i] >= t) continue;
#pragma unroll
    for (int nd = 0; nd < ND; nd++)
      attn2_store2(dq + base, rows[i], nd * 8 + 2 * qd, hd, wide, acc[nd][2 * i] * scale, acc[nd][2 * i + 1] * scale);
  }
}

// backward_dkdv reads dout as backward_dq rounded it (doh).
template <typename H, int HD>
__device__ void attn_backward_dkdv_mma2(float* dk, float* dv, const H* q, const H* k, const H* v, const H* doh,
                                        const float* lse, const float* delta, i64 nbh, i64 t, int hd, float scale,
                                        u64 seed, u64 offset, u64 thr, float dscale) {
  using C = Attn2Dkv<HD>;
  constexpr int W = C::W, NT = 32 * W, KB = 16 * W, QB = C::BN, S = HD + 8, KD = HD / 16, NQ = QB / 8, ND = HD / 8;
  constexpr bool RES = C::RES;
  constexpr int STAGE = 2 * QB * S, KV = 2 * KB * S;
  constexpr int SMEM = RES ? KV + 2 * STAGE : KV > 2 * STAGE ? KV : 2 * STAGE;
  static_assert(SMEM * 2 + 4 * QB * 4 <= 48 * 1024, "static shared memory");
  static_assert(QB <= NT, "a thread copies each row's lse and delta");
  // The K and V tiles, then (at KV when RES, else in their place) two
  // stages of (Q tile, dout tile).
  __shared__ __align__(128) H sm[SMEM];
  __shared__ __align__(16) float sL[2][QB], sD[2][QB];
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, qd = lane & 3;
  const i64 h = blockIdx.x % nbh;
  const i64 k0 = (blockIdx.x / nbh) * KB;  // the first key tiles have the most rows
  const i64 base = h * t * hd;
  const bool fast = hd == HD && attn2_aligned(q) && attn2_aligned(k) && attn2_aligned(v) && attn2_aligned(doh);
  attn2_tile<KB, HD, S, NT>(sm, k + base, k0, t, hd, fast);
  attn2_tile<KB, HD, S, NT>(sm + KB * S, v + base, k0, t, hd, fast);
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();
  u32 ka[RES ? 1 : KD][4], va[RES ? 1 : KD][4];
  if constexpr (!RES) {
#pragma unroll
    for (int kd = 0; kd < KD; kd++) {
      ldsm_a<S>(ka[kd], sm, warp * 16, kd * 16);
      ldsm_a<S>(va[kd], sm + KB * S, warp * 16, kd * 16);
    }
    __syncthreads();
  }
  H* const stages = sm + (RES ? KV : 0);
  const i64 qs = (k0 / QB) * QB;  // the first query tile with a row at or after k0
  const int nt = (int)((t - qs + QB - 1) / QB);
  auto load_q = [&](int it) {
    H* st = stages + (it & 1) * STAGE;
    const i64 q0 = qs + (i64)it * QB;
    attn2_tile<QB, HD, S, NT>(st, q + base, q0, t, hd, fast);
    attn2_tile<QB, HD, S, NT>(st + QB * S, doh + base, q0, t, hd, fast);
    if (tid < QB) {
      const i64 row = q0 + tid, r = row < t ? row : 0;
      cp_async4(&sL[it & 1][tid], lse + h * t + r, row < t);
      cp_async4(&sD[it & 1][tid], delta + h * t + r, row < t);
    }
    cp_async_commit();
  };
  load_q(0);
  const float sl2 = scale * ATTN_LOG2E;
  const i64 w0 = k0 + warp * 16;  // the warp's first key
  const i64 keys[2] = {w0 + g, w0 + g + 8};
  float gk[ND][4], gv[ND][4];
#pragma unroll
  for (int nd = 0; nd < ND; nd++)
#pragma unroll
    for (int e = 0; e < 4; e++) gk[nd][e] = gv[nd][e] = 0.f;
  for (int it = 0; it < nt; it++) {
    const i64 q0 = qs + (i64)it * QB;
    if (it + 1 < nt) {
      load_q(it + 1);
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    const H* sQ = stages + (it & 1) * STAGE;
    const H* sDO = sQ + QB * S;
    const float* rl = sL[it & 1];
    const float* rd = sD[it & 1];
    if (w0 <= q0 + QB - 1 && w0 < t) {  // else the warp's keys all come after the tile's rows
      float s[NQ][4], dp[NQ][4];        // transposed: [key][query]
#pragma unroll
      for (int n = 0; n < NQ; n++)
#pragma unroll
        for (int e = 0; e < 4; e++) s[n][e] = dp[n][e] = 0.f;
#pragma unroll
      for (int kd = 0; kd < KD; kd++) {
        u32 a[4], av[4];
        if constexpr (RES) {
          ldsm_a<S>(a, sm, warp * 16, kd * 16);
          ldsm_a<S>(av, sm + KB * S, warp * 16, kd * 16);
        } else {
#pragma unroll
          for (int j = 0; j < 4; j++) a[j] = ka[kd][j], av[j] = va[kd][j];
        }
#pragma unroll
        for (int n = 0; n < NQ; n += 2) {
          u32 b[4];
          ldsm_b<S>(b, sQ, n * 8, kd * 16);
          mma16816<H>(s[n], a, b[0], b[1]);
          mma16816<H>(s[n + 1], a, b[2], b[3]);
          ldsm_b<S>(b, sDO, n * 8, kd * 16);
          mma16816<H>(dp[n], av, b[0], b[1]);
          mma16816<H>(dp[n + 1], av, b[2], b[3]);
        }
      }
      const bool whole = q0 >= w0 + 15 && q0 + QB - 1 < t;
      const int first[2] = {(int)(keys[0] - q0), (int)(keys[1] - q0)};  // a key's first row in the tile
      const int end = (int)min((i64)QB, t - q0);                       // rows past t
#pragma unroll
      for (int n = 0; n < NQ; n++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
          const int r = n * 8 + 2 * qd + (e & 1);
          const float p = (whole || (first[e >> 1] <= r && r < end)) ? exp2f(s[n][e] * sl2 - rl[r] * ATTN_LOG2E) : 0.f;
          s[n][e] = p;
        }
      if (thr != 0) {
#pragma unroll
        for (int n = 0; n < NQ; n++)
#pragma unroll
          for (int e = 0; e < 4; e++) {
            const int r = n * 8 + 2 * qd + (e & 1);
            const float p = s[n][e];
            float pd = p, dpd = dp[n][e];
            if (p != 0.f) {
              const bool kept = attn_keep(seed, offset, thr, h, t, q0 + r, keys[e >> 1]);
              pd = kept ? p * dscale : 0.f;
              dpd = kept ? dpd * dscale : 0.f;
            }
            s[n][e] = pd;
            dp[n][e] = p * (dpd - rd[r]);  // ds
          }
      } else {
#pragma unroll
        for (int n = 0; n < NQ; n++)
#pragma unroll
          for (int e = 0; e < 4; e++) dp[n][e] = s[n][e] * (dp[n][e] - rd[n * 8 + 2 * qd + (e & 1)]);  // ds
      }
#pragma unroll
      for (int j = 0; j < QB / 16; j++) {
        u32 pa[4], da[4];
        mma_acc_to_a<H>(pa, s[2 * j], s[2 * j + 1]);
        mma_acc_to_a<H>(da, dp[2 * j], dp[2 * j + 1]);
#pragma unroll
        for (int nd = 0; nd < ND; nd += 2) {
          u32 b[4];
          ldsm_bt<S>(b, sDO, nd * 8, j * 16);
          mma16816<H>(gv[nd], pa, b[0], b[1]);
          mma16816<H>(gv[nd + 1], pa, b[2], b[3]);
          ldsm_bt<S>(b, sQ, nd * 8, j * 16);
          mma16816<H>(gk[nd], da, b[0], b[1]);
          mma16816<H>(gk[nd + 1], da, b[2], b[3]);
        }
      }
    }
    __syncthreads();
  }
  const bool wide = hd == HD && ((uintptr_t)dk & 7) == 0 && ((uintptr_t)dv & 7) == 0;
#pragma unroll
  for (int i = 0; i < 2; i++) {
    if (keys[i] >= t) continue;
#pragma unroll
    for (int nd = 0; nd < ND; nd++) {
      const int d = nd * 8 + 2 * qd;
      attn2_store2(dk + base, keys[i], d, hd, wide, gk[nd][2 * i] * scale, gk[nd][2 * i + 1] * scale);
      attn2_store2(dv + base, keys[i], d, hd, wide, gv[nd][2 * i], gv[nd][2 * i + 1]);
    }
  }
}

#define ATTENTION_MMA2_KERNELS(sfx, H, HD)                                                                          \
  extern "C" __global__ void __launch_bounds__(32 * Attn2Fwd<HD>::W, Attn2Fwd<HD>::MINB)                            \
      attention_forward_mma2_##sfx##_h##HD(float* out, float* lse, const H* q, const H* k, const H* v, i64 nbh,     \
                                           i64 t, int hd, float scale, u64 seed, u64 offset, u64 thr, float dscale) { \
    attn_forward_mma2<H, HD>(out, lse, q, k, v, nbh, t, hd, scale, seed, offset, thr, dscale);                      \
  }                                                                                                                 \
  extern "C" __global__ void __launch_bounds__(32 * Attn2Dq<HD>::W, Attn2Dq<HD>::MINB)                              \
      attention_backward_dq_mma2_##sfx##_h##HD(float* dq, float* delta, H* doh, const H* q, const H* k, const H* v, \
                                               const float* out, const float* dout, const float* lse, i64 nbh,      \
                                               i64 t, int hd, float scale, u64 seed, u64 offset, u64 thr,           \
                                               float dscale) {                                                      \
    attn_backward_dq_mma2<H, HD>(dq, delta, doh, q, k, v, out, dout, lse, nbh, t, hd, scale, seed, offset, thr,     \
                                 dscale);                                                                           \
  }                                                                                                                 \
  extern "C" __global__ void __launch_bounds__(32 * Attn2Dkv<HD>::W, Attn2Dkv<HD>::MINB)                            \
      attention_backward_dkdv_mma2_##sfx##_h##HD(float* dk, float* dv, const H* q, const H* k, const H* v,          \
                                                 const H* doh, const float* lse, const float* delta, i64 nbh,       \
                                                 i64 t, int hd, float scale, u64 seed, u64 offset, u64 thr,         \
                                                 float dscale) {                                                    \
    attn_backward_dkdv_mma2<H, HD>(dk, dv, q, k, v, doh, lse, delta, nbh, t, hd, scale, seed, offset, thr,          \
                                   dscale);                                                                         \
  }

#define ATTENTION_MMA2_KERNELS_ALL_HD(sfx, H) \
  ATTENTION_MMA2_KERNELS(sfx, H, 16)          \
  ATTENTION_MMA2_KERNELS(sfx, H, 32)          \
  ATTENTION_MMA2_KERNELS(sfx, H, 64)          \
  ATTENTION_MMA2_KERNELS(sfx, H, 128)

ATTENTION_MMA2_KERNELS_ALL_HD(f16, __half)
ATTENTION_MMA2_KERNELS_ALL_HD(bf16, __nv_bfloat16)
