// attention_mma3.cuh: the fused attention of attention.cuh on tensor
// cores for float16 and bfloat16 inputs (sm_80+; attention_tc.cuh's
// mma.sync, ldmatrix and cp.async): the same algorithm, passes and dropout
// mask, operands rounded to the input type H (float32 softmax, lse and
// delta), under the names attention_<pass>_mma3_<type>_h<HD> (no dropout)
// and attention_<pass>_mma3drop_<type>_h<HD> (dropout). The same source
// compiled for H = float runs float32 inputs on TF32 tensor cores
// (<type> tf32, HD 16 to 64; attention_tf32.cuh): every product's
// operands rounded to TF32 as they enter a fragment, its own tile tables.
//
//   - Each pass is compiled twice: DROP = false leaves the inlined Philox
//     code out (the launcher runs it when p == 0, as training without
//     attention dropout does), which frees the registers that let the
//     tiles grow and more blocks share an SM (Attn3Fwd and co. below);
//     DROP = true is the dropout variant, at smaller tiles.
//   - A block is W warps of 16 rows (query rows in forward and
//     backward_dq, keys in backward_dkdv) that keep their A fragments in
//     registers (backward_dkdv at HD >= 64 without dropout, and at HD 128,
//     reloads its K and V fragments from shared memory instead: RES; the
//     float32 three-product kernels' backward_dq and backward_dkdv at HD
//     64 reload theirs too, at 2 warps a block).
//     No dropout, HD <= 64: every pass takes 128 rows (8 warps) a block
//     at 2 or 3 blocks an SM; HD 128: forward 4 warps at 3 blocks,
//     backward_dq 4 at 2.
//   - Streamed tiles (K and V in forward and backward_dq; Q, dO, lse and
//     delta in backward_dkdv) are copied by cp.async into two stages: the
//     copy of tile j+1 runs while the tensor cores work on tile j. One
//     __syncthreads a streamed tile: the block waits for tile j, syncs (so
//     every warp is also done with tile j-1), then issues the copy of
//     tile j+1 into tile j-1's stage and computes tile j while it lands.
//   - Every operand cp.async reads is of type H. The one float32 operand
//     that is streamed, dout in backward_dkdv, is rounded once by
//     backward_dq (which reads each dout row once anyway) into doh, a
//     (bh, t, hd) scratch of H, instead of by every key block.
//   - Softmax in base 2: scale·log2(e) is folded into one multiply and
//     exp2f replaces expf; lse is written in natural log.
//   - A warp skips the products of a tile whose keys all lie after its
//     rows (the causal mask), and only diagonal tiles test the mask.
//   - Row and key indices are 32-bit in the loops (a head's t rows of rs
//     elements fit in 31 bits: the launcher checks), streamed tiles are
//     addressed from the head's base pointer: fewer registers live across
//     the loop.
//   - The operands need not be contiguous (bh, t, hd) (attention_tc.cuh's
//     attn_head): q, k, v, dq, dk and dv lie (bh / nh, t, nh, hd) with
//     rows rsi elements apart, out and dout with rows rso apart, so the
//     kernels read the heads of one (B, T, 3C) product in place and write
//     the output as (B, T, C) and the gradients as (B, T, 3C), with no
//     head split or merge copies. lse, delta and doh stay contiguous.
//
// When hd is not the kernel's HD (zero padding) or a pointer is not
// 16-byte aligned, tiles are loaded element by element instead of by
// cp.async; the rest is the same.
//
// The launch shapes (warps a block) are mirrored by
// tensor/cuda_attention.go's attnMMA3Warps; __launch_bounds__ caps the
// registers so that MINB blocks fit an SM, at 0 spill bytes (ptxas -v).
#pragma once
#include "attention_tf32.cuh"

// Tiles: W warps of 16 rows each (query rows in forward and backward_dq,
// keys in backward_dkdv), BN rows of the streamed tiles, MINB blocks an
// SM for __launch_bounds__; backward_dkdv reloads its K and V fragments
// from shared memory when RES, backward_dq its Q and dout fragments.
// Without dropout (ptxas -v, sm_90, registers; all 0 spill bytes):
//   forward        HD 16: 8 warps, BN 64, SUB 32, 3 blocks (79)   32: 8, 64, 32, 3 (80)
//                  HD 64: 8 warps, BN 64, SUB 32, 2 blocks (115)  128: 4, 32, 32, 3 (161)
//   backward_dq    HD 16: 8, 64, 32, 3 (80)   32: 8, 64, 16, 3 (80)   64: 8, 32, 16, 2 (125)
//                  HD 128: 4, 32, 32, 2 (209)
//   backward_dkdv  HD 16: 8, 16, 3 (80)   32: 8, 32, 2 (128)   64: 8, 16, 2, RES (128)
//                  HD 128: 2, 16, 4, RES (213)
// Forward and backward_dq compute a BN-key tile SUB keys at a time: the
// registers of SUB, the barriers of BN (forward HD 64 at SUB 64 and
// backward_dq HD 64 at SUB 32 spill at 2 blocks; forward HD 64 at SUB 16
// fits 3 blocks, 80 registers, untried on a GPU). With dropout (the d*
// tables, SUB = BN; the MINB the largest at which ptxas spills nothing):
//   forward        HD 16-64: 4 warps, BN 32, 3 blocks   HD 128: 8, 32, 1
//   backward_dq    HD 16-64: 4 warps, BN 32, 2 blocks   HD 128: 8, 32, 1
//   backward_dkdv  HD 16-64: 4 warps, BN 16, 3 blocks   HD 128: 2, 16, 4, RES
template <int HD> struct Attn3Tab {
  static const int i = HD == 16 ? 0 : HD == 32 ? 1 : HD == 64 ? 2 : 3;
};
// The float32 kernels (TF32, K 1, and three TF32 products, K 2), HD 16 to
// 64 (HD 128 runs the float32-math kernels), at twice the bytes a tile:
// their own tables, chosen to keep static shared memory under 48 KiB.
// The TF32 kernels' backward passes keep their fragments in registers at
// every HD (RES would need the held tiles beside the streamed stages:
// over 48 KiB at HD 64 and 4 warps). The three-product kernels hold each
// operand's split as they multiply: MINB 1 (up to 255 registers a
// thread), except both backward passes at HD 64, which run 2 warps a
// block with RES (the held tiles fit beside the stages at 32 rows) at 6
// blocks an SM (the ATTN_X3_* defaults below).
template <int K> struct Attn3FwdTab {
  static constexpr int w[4] = {8, 8, 8, 4}, bn[4] = {64, 64, 64, 32}, sub[4] = {32, 32, 32, 32}, minb[4] = {3, 3, 2, 3};
  static constexpr int dw[4] = {4, 4, 4, 8}, dbn[4] = {32, 32, 32, 32}, dminb[4] = {3, 3, 3, 1};
};
template <> struct Attn3FwdTab<1> {
  static constexpr int w[4] = {8, 8, 8, 8}, bn[4] = {64, 64, 32, 32}, sub[4] = {32, 32, 32, 32}, minb[4] = {3, 3, 2, 2};
  static constexpr int dw[4] = {4, 4, 4, 4}, dbn[4] = {32, 32, 32, 32}, dminb[4] = {3, 3, 2, 2};
};
template <int K> struct Attn3DqTab {
  static constexpr int w[4] = {8, 8, 8, 4}, bn[4] = {64, 64, 32, 32}, sub[4] = {32, 16, 16, 32}, minb[4] = {3, 3, 2, 2};
  static constexpr int dw[4] = {4, 4, 4, 8}, dbn[4] = {32, 32, 32, 32}, dminb[4] = {2, 2, 2, 1};
  static constexpr bool res(int, bool) { return false; }
};
template <> struct Attn3DqTab<1> {
  static constexpr int w[4] = {8, 8, 4, 4}, bn[4] = {64, 64, 32, 32}, sub[4] = {32, 16, 16, 16}, minb[4] = {2, 2, 2, 2};
  static constexpr int dw[4] = {4, 4, 4, 4}, dbn[4] = {32, 32, 32, 32}, dminb[4] = {2, 2, 1, 1};
  static constexpr bool res(int, bool) { return false; }
};
template <int K> struct Attn3DkvTab {
  static constexpr int w[4] = {8, 8, 8, 2}, bn[4] = {16, 32, 16, 16}, minb[4] = {3, 2, 2, 4};
  static constexpr int dw[4] = {4, 4, 4, 2}, dbn[4] = {16, 16, 16, 16}, dminb[4] = {3, 3, 3, 4};
  static constexpr bool res(int hd, bool drop) { return drop ? hd == 128 : hd >= 64; }
};
template <> struct Attn3DkvTab<1> {
  static constexpr int w[4] = {8, 8, 4, 4}, bn[4] = {16, 32, 16, 16}, minb[4] = {3, 2, 1, 1};
  static constexpr int dw[4] = {4, 4, 4, 4}, dbn[4] = {16, 16, 16, 16}, dminb[4] = {3, 2, 1, 1};
  static constexpr bool res(int, bool) { return false; }
};
// The three-product kernels at HD 64 without dropout (GPT-2's float32
// attention) take their tiles from ATTN_X3_* macros, so that
// bench/gpu-attn-sweep.sh can compile variants with -D and time them on
// the GPU; the defaults are the tiles it measured fastest.
// Session 15's sweep (bench/results/speed-2026-12-03-s15.md): both
// backward passes at 2 warps with their held tiles reloaded from shared
// memory (RES) and 6 blocks an SM: 140 and 161 registers, no spills,
// where 4 warps holding the fragments took 255 registers with spills and
// 2 blocks an SM; the backward 1.92 -> 1.46 ms at gpt2's shape.
#ifndef ATTN_X3_DQ_W
#define ATTN_X3_DQ_W 2
#endif
#ifndef ATTN_X3_DQ_BN
#define ATTN_X3_DQ_BN 16
#endif
#ifndef ATTN_X3_DQ_SUB
#define ATTN_X3_DQ_SUB 16
#endif
#ifndef ATTN_X3_DQ_MINB
#define ATTN_X3_DQ_MINB 6
#endif
#ifndef ATTN_X3_DQ_RES
#define ATTN_X3_DQ_RES 1
#endif
#ifndef ATTN_X3_DKV_W
#define ATTN_X3_DKV_W 2
#endif
#ifndef ATTN_X3_DKV_BN
#define ATTN_X3_DKV_BN 16
#endif
#ifndef ATTN_X3_DKV_MINB
#define ATTN_X3_DKV_MINB 6
#endif
#ifndef ATTN_X3_DKV_RES
#define ATTN_X3_DKV_RES 1
#endif
template <> struct Attn3FwdTab<2> : Attn3FwdTab<1> {
  static constexpr int minb[4] = {1, 1, 1, 1}, dminb[4] = {1, 1, 1, 1};
};
template <> struct Attn3DqTab<2> : Attn3DqTab<1> {
  static constexpr int w[4] = {8, 8, ATTN_X3_DQ_W, 4}, bn[4] = {64, 64, ATTN_X3_DQ_BN, 32},
                       sub[4] = {32, 16, ATTN_X3_DQ_SUB, 16}, minb[4] = {1, 1, ATTN_X3_DQ_MINB, 1};
  static constexpr int dminb[4] = {1, 1, 1, 1};
  static constexpr bool res(int hd, bool drop) { return ATTN_X3_DQ_RES && hd == 64 && !drop; }
};
template <> struct Attn3DkvTab<2> : Attn3DkvTab<1> {
  static constexpr int w[4] = {8, 8, ATTN_X3_DKV_W, 4}, bn[4] = {16, 32, ATTN_X3_DKV_BN, 16},
                       minb[4] = {1, 1, ATTN_X3_DKV_MINB, 1};
  static constexpr int dminb[4] = {1, 1, 1, 1};
  static constexpr bool res(int hd, bool drop) { return ATTN_X3_DKV_RES && hd == 64 && !drop; }
};
// Attn3K is the table kind of input type H: 0 for 16-bit types, 1 float
// (TF32), 2 f32x3.
template <typename H> struct Attn3K {
  static const int k = sizeof(H) == 2 ? 0 : std::is_same_v<H, float> ? 1 : 2;
};
template <int HD, bool DROP, int K = 0> struct Attn3Fwd {
  using T = Attn3FwdTab<K>;
  static const int i = Attn3Tab<HD>::i;
  static const int W = DROP ? T::dw[i] : T::w[i], BN = DROP ? T::dbn[i] : T::bn[i];
  static const int SUB = DROP ? BN : T::sub[i], MINB = DROP ? T::dminb[i] : T::minb[i];
};
template <int HD, bool DROP, int K = 0> struct Attn3Dq {
  using T = Attn3DqTab<K>;
  static const int i = Attn3Tab<HD>::i;
  static const bool RES = T::res(HD, DROP);
  static const int W = DROP ? T::dw[i] : T::w[i], BN = DROP ? T::dbn[i] : T::bn[i];
  static const int SUB = DROP ? BN : T::sub[i], MINB = DROP ? T::dminb[i] : T::minb[i];
};
template <int HD, bool DROP, int K = 0> struct Attn3Dkv {
  using T = Attn3DkvTab<K>;
  static const int i = Attn3Tab<HD>::i;
  static const bool RES = T::res(HD, DROP);
  static const int W = DROP ? T::dw[i] : T::w[i], BN = DROP ? T::dbn[i] : T::bn[i];
  static const int MINB = DROP ? T::dminb[i] : T::minb[i];
};

// attn_mma_rounded accumulates acc += R B for the warp's 16 rows: R the
// scores s (accumulator layout, NS tiles of 8 columns) rounded to H, B the
// (NS * 8) x (ND * 8) tile read transposed from the row-major shared tile
// sB: the forward's P V and backward_dq's dS K.
template <typename H, int S, int NS, int ND>
__device__ __forceinline__ void attn_mma_rounded(float (&acc)[ND][4], const float (&s)[NS][4], const H* sB) {
#pragma unroll
  for (int j = 0; j < NS / 2; j++) {
    u32 a[Tc<H>::A];
    tc_acc_to_a<H>(a, s[2 * j], s[2 * j + 1]);
#pragma unroll
    for (int nd = 0; nd < ND; nd += 2) {
      u32 b[Tc<H>::B];
      tc_ldbt<S>(b, sB, nd * 8, j * 16);
      tc_mma2<H>(acc[nd], acc[nd + 1], a, b);
    }
  }
}

// attn_load_kv starts the copy of the K and V tiles of keys [k0, k0+BC)
// into one stage (the K tile, then the V tile): the streamed tile of the
// forward and of backward_dq.
template <int BC, int HD, int S, int NT, typename H>
__device__ __forceinline__ void attn_load_kv(H* st, const H* kh, const H* vh, int k0, int T, int hd, int rs,
                                             bool fast) {
  attn_tile<BC, HD, S, NT>(st, kh, k0, T, hd, rs, fast);
  attn_tile<BC, HD, S, NT>(st + BC * S, vh, k0, T, hd, rs, fast);
  cp_async_commit();
}

template <typename H, int HD, bool DROP, class C = Attn3Fwd<HD, DROP, Attn3K<H>::k>>
__device__ void attn_forward_mma3(float* out, float* lse, const H* q, const H* k, const H* v, i64 nbh, i64 t, int hd,
                                  int nh, int rsi, int rso, float scale, u64 seed, u64 offset, u64 thr,
                                  float dscale) {
  constexpr int W = C::W, NT = 32 * W, BR = 16 * W, BC = C::BN, SUB = C::SUB, S = HD + Tc<H>::PAD, KD = HD / 16, NS = SUB / 8,
                ND = HD / 8;
  constexpr int STAGE = 2 * BC * S, SMEM = BR * S > 2 * STAGE ? BR * S : 2 * STAGE;
  static_assert(SMEM * (int)sizeof(H) <= 48 * 1024, "static shared memory");
  static_assert(BC % SUB == 0, "sub-tiles");
  __shared__ __align__(128) H sm[SMEM];  // the Q tile, then two stages of (K tile, V tile)
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, qd = lane & 3;
  const i64 h = blockIdx.x % nbh, nq = (t + BR - 1) / BR;
  const int q0 = (int)(nq - 1 - blockIdx.x / nbh) * BR, T = (int)t;  // the longest rows first; row indices in 32 bits
  const i64 base = attn_head(h, t, hd, nh, rsi);                     // q, k, v's head
  const bool fast = hd == HD && (rsi & (Tc<H>::E - 1)) == 0 && attn_aligned(q + base) && attn_aligned(k + base) &&
                    attn_aligned(v + base);
  attn_tile<BR, HD, S, NT>(sm, q + base, (i64)q0, t, hd, (i64)rsi, fast);
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();
  u32 qa[KD][Tc<H>::A];
#pragma unroll
  for (int kd = 0; kd < KD; kd++) tc_lda<S>(qa[kd], sm, warp * 16, kd * 16);
  __syncthreads();  // the Q tile is in registers: its space is the stages'
  const int nk = (min(q0 + BR, T) - 1) / BC + 1;
  const H *kh = k + base, *vh = v + base;
  auto load_kv = [&](int kt) { attn_load_kv<BC, HD, S, NT>(sm + (kt & 1) * STAGE, kh, vh, kt * BC, T, hd, rsi, fast); };
  load_kv(0);
  const float sl2 = scale * ATTN_LOG2E;
  const int w0 = q0 + warp * 16;  // the warp's first row
  const int rows[2] = {w0 + g, w0 + g + 8};
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f}, o[ND][4];  // m in log2 units
#pragma unroll
  for (int nd = 0; nd < ND; nd++) o[nd][0] = o[nd][1] = o[nd][2] = o[nd][3] = 0.f;
  for (int kt = 0; kt < nk; kt++) {
    cp_async_wait<0>();  // tile kt, the only group in flight
    __syncthreads();     // tile kt is in its stage for every thread, and tile kt-1's stage is free
    if (kt + 1 < nk) load_kv(kt + 1);
#pragma unroll 1
    for (int sb = 0; sb < BC / SUB; sb++) {  // SUB keys at a time: the registers of SUB, the barriers of BC
      const int k0 = kt * BC + sb * SUB;
      const H* sK = sm + (kt & 1) * STAGE + sb * SUB * S;
      const H* sV = sK + BC * S;
      if (k0 <= w0 + 15 && w0 < T) {  // else every key of the tile is masked for the warp
        float s[NS][4];
#pragma unroll
        for (int n = 0; n < NS; n++) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;
#pragma unroll
        for (int kd = 0; kd < KD; kd++)
#pragma unroll
          for (int n = 0; n < NS; n += 2) {
            u32 b[Tc<H>::B];
            tc_ldb<S>(b, sK, n * 8, kd * 16);
            tc_mma2<H>(s[n], s[n + 1], qa[kd], b);
          }
        float mx[2] = {m[0], m[1]};
        const bool whole = k0 + SUB - 1 <= w0 && w0 + 15 < T;
        const int lim[2] = {rows[0] < T ? rows[0] - k0 : -1, rows[1] < T ? rows[1] - k0 : -1};
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
        if (DROP && thr != 0)
#pragma unroll
          for (int n = 0; n < NS; n++)
#pragma unroll
            for (int e = 0; e < 4; e++)
              if (s[n][e] != 0.f)
                s[n][e] = attn_keep(seed, offset, thr, h, t, rows[e >> 1], k0 + n * 8 + 2 * qd + (e & 1))
                              ? s[n][e] * dscale
                              : 0.f;
#pragma unroll
        for (int i = 0; i < 2; i++) {
          l[i] = l[i] * alpha[i] + quad_sum(sum[i]);
          m[i] = mx[i];
        }
#pragma unroll
        for (int nd = 0; nd < ND; nd++)
          o[nd][0] *= alpha[0], o[nd][1] *= alpha[0], o[nd][2] *= alpha[1], o[nd][3] *= alpha[1];
        attn_mma_rounded<H, S>(o, s, sV);  // o += P V
      }
    }
  }
  float* const oh = out + attn_head(h, t, hd, nh, rso);
  const bool wide = hd == HD && (rso & 1) == 0 && ((uintptr_t)oh & 7) == 0;
#pragma unroll
  for (int i = 0; i < 2; i++) {
    if (rows[i] >= T) continue;
    const float inv = 1.f / l[i];
#pragma unroll
    for (int nd = 0; nd < ND; nd++)
      attn_store2(oh, rows[i], nd * 8 + 2 * qd, hd, rso, wide, o[nd][2 * i] * inv, o[nd][2 * i + 1] * inv);
    if (qd == 0) lse[h * t + rows[i]] = m[i] * ATTN_LN2 + logf(l[i]);
  }
}

// backward_dq also rounds dout to H into doh (read by backward_dkdv) and
// writes delta = rowsum(dout * out).
template <typename H, int HD, bool DROP, class C = Attn3Dq<HD, DROP, Attn3K<H>::k>>
__device__ void attn_backward_dq_mma3(float* dq, float* delta, H* doh, const H* q, const H* k, const H* v,
                                      const float* out, const float* dout, const float* lse, i64 nbh, i64 t, int hd,
                                      int nh, int rsi, int rso, float scale, u64 seed, u64 offset, u64 thr,
                                      float dscale) {
  constexpr int W = C::W, NT = 32 * W, BR = 16 * W, BC = C::BN, SUB = C::SUB, S = HD + Tc<H>::PAD, KD = HD / 16, NS = SUB / 8,
                ND = HD / 8;
  constexpr bool RES = C::RES;  // the Q and dout fragments reloaded from their tiles, not held in registers
  constexpr int STAGE = 2 * BC * S, QG = RES ? 2 * BR * S : 0;
  constexpr int SMEM = RES ? QG + 2 * STAGE : BR * S > 2 * STAGE ? BR * S : 2 * STAGE;
  static_assert(SMEM * (int)sizeof(H) + BR * 4 <= 48 * 1024, "static shared memory");
  static_assert(BC % SUB == 0, "sub-tiles");
  // The Q tile, the dout tile, then two stages of (K tile, V tile) in
  // their place (RES: after them).
  __shared__ __align__(128) H sm[SMEM];
  __shared__ float sDelta[BR];
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, qd = lane & 3;
  const i64 h = blockIdx.x % nbh, nq = (t + BR - 1) / BR;
  const int q0 = (int)(nq - 1 - blockIdx.x / nbh) * BR, T = (int)t;  // row indices in 32 bits
  const i64 base = attn_head(h, t, hd, nh, rsi);                     // q, k, v and dq's head
  const bool fast = hd == HD && (rsi & (Tc<H>::E - 1)) == 0 && attn_aligned(q + base) && attn_aligned(k + base) &&
                    attn_aligned(v + base);
  attn_tile<BR, HD, S, NT>(sm, q + base, (i64)q0, t, hd, (i64)rsi, fast);
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();
  u32 qa[RES ? 1 : KD][Tc<H>::A], ga[RES ? 1 : KD][Tc<H>::A];
  H* const sG = sm + (RES ? BR * S : 0);  // the dout tile
  if constexpr (!RES) {
#pragma unroll
    for (int kd = 0; kd < KD; kd++) tc_lda<S>(qa[kd], sm, warp * 16, kd * 16);
    __syncthreads();
  }
  // The dout tile, rounded to H into sG and doh (contiguous (bh, t, hd));
  // delta.
  const float *go0 = dout + attn_head(h, t, hd, nh, rso), *yo0 = out + attn_head(h, t, hd, nh, rso);
  H* const dh0 = doh + h * t * hd;
  if (hd == HD && (rso & 3) == 0 && attn_aligned(go0) && attn_aligned(yo0) && attn_aligned(dh0)) {
    constexpr int G = HD / 8;  // a row's 8-element groups: G consecutive lanes
#pragma unroll
    for (int i = tid; i < BR * G; i += NT) {
      const int r = i / G, c = (i - r * G) * 8;
      const i64 row = q0 + r;
      Pack<H, 8> p;
      float dot = 0.f;
      if (row < t) {
        const float* go = go0 + row * rso + c;
        const float* yo = yo0 + row * rso + c;
        const Pack<float, 4> g0 = load_pack<float, 4>(go), g1 = load_pack<float, 4>(go + 4);
        const Pack<float, 4> y0 = load_pack<float, 4>(yo), y1 = load_pack<float, 4>(yo + 4);
#pragma unroll
        for (int j = 0; j < 4; j++) {
          dot += g0.v[j] * y0.v[j] + g1.v[j] * y1.v[j];
          p.v[j] = MmaType<H>::from(g0.v[j]), p.v[j + 4] = MmaType<H>::from(g1.v[j]);
        }
        store_h8<H>(dh0 + row * HD + c, p);
      } else {
#pragma unroll
        for (int j = 0; j < 8; j++) p.v[j] = MmaType<H>::from(0.f);
      }
      store_h8<H>(sG + r * S + c, p);
#pragma unroll
      for (int o = G / 2; o > 0; o >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, o);
      if (c == 0) sDelta[r] = dot;
    }
  } else {
    for (int i = tid; i < BR * HD; i += NT) {
      const int r = i / HD, d = i - r * HD;
      const i64 row = q0 + r;
      const H x = MmaType<H>::from((row < t && d < hd) ? go0[row * rso + d] : 0.f);
      sG[r * S + d] = x;
      if (row < t && d < hd) dh0[row * hd + d] = x;
    }
    for (int r = warp; r < BR; r += W) {  // a warp per row
      const i64 row = q0 + r;
      float acc = 0.f;
      if (row < t)
        for (int d = lane; d < hd; d += 32) acc += go0[row * rso + d] * yo0[row * rso + d];
      acc = warp_reduce(acc, SumOp());
      if (lane == 0) sDelta[r] = acc;
    }
  }
  __syncthreads();
  if constexpr (!RES)
#pragma unroll
    for (int kd = 0; kd < KD; kd++) tc_lda<S>(ga[kd], sm, warp * 16, kd * 16);
  const int lr[2] = {warp * 16 + g, warp * 16 + g + 8};
  const int w0 = q0 + warp * 16;
  const int rows[2] = {w0 + g, w0 + g + 8};
  const float rd[2] = {sDelta[lr[0]], sDelta[lr[1]]};
  const float rl[2] = {rows[0] < t ? lse[h * t + rows[0]] * ATTN_LOG2E : 0.f,
                       rows[1] < t ? lse[h * t + rows[1]] * ATTN_LOG2E : 0.f};
  if (qd == 0)
#pragma unroll
    for (int i = 0; i < 2; i++)
      if (rows[i] < t) delta[h * t + rows[i]] = rd[i];
  __syncthreads();  // the dout tile is in registers (RES: every thread has written it)
  const int nk = (min(q0 + BR, T) - 1) / BC + 1;
  const H *kh = k + base, *vh = v + base;
  H* const stages = sm + QG;
  auto load_kv = [&](int kt) { attn_load_kv<BC, HD, S, NT>(stages + (kt & 1) * STAGE, kh, vh, kt * BC, T, hd, rsi, fast); };
  load_kv(0);
  const float sl2 = scale * ATTN_LOG2E;
  float acc[ND][4];
#pragma unroll
  for (int nd = 0; nd < ND; nd++) acc[nd][0] = acc[nd][1] = acc[nd][2] = acc[nd][3] = 0.f;
  for (int kt = 0; kt < nk; kt++) {
    cp_async_wait<0>();
    __syncthreads();  // tile kt is in for every thread; tile kt-1's stage is free
    if (kt + 1 < nk) load_kv(kt + 1);
#pragma unroll 1
    for (int sb = 0; sb < BC / SUB; sb++) {  // SUB keys at a time: the registers of SUB, the barriers of BC
      const int k0 = kt * BC + sb * SUB;
      const H* sK = stages + (kt & 1) * STAGE + sb * SUB * S;
      const H* sV = sK + BC * S;
      if (k0 <= w0 + 15 && w0 < T) {
        float s[NS][4], dp[NS][4];
#pragma unroll
        for (int n = 0; n < NS; n++)
#pragma unroll
          for (int e = 0; e < 4; e++) s[n][e] = dp[n][e] = 0.f;
#pragma unroll
        for (int kd = 0; kd < KD; kd++) {
          u32 a[Tc<H>::A], ag[Tc<H>::A];
          if constexpr (RES) {
            tc_lda<S>(a, sm, warp * 16, kd * 16);
            tc_lda<S>(ag, sG, warp * 16, kd * 16);
          } else {
#pragma unroll
            for (int j = 0; j < Tc<H>::A; j++) a[j] = qa[kd][j], ag[j] = ga[kd][j];
          }
#pragma unroll
          for (int n = 0; n < NS; n += 2) {
            u32 b[Tc<H>::B];
            tc_ldb<S>(b, sK, n * 8, kd * 16);
            tc_mma2<H>(s[n], s[n + 1], a, b);
            tc_ldb<S>(b, sV, n * 8, kd * 16);
            tc_mma2<H>(dp[n], dp[n + 1], ag, b);
          }
        }
        const bool whole = k0 + SUB - 1 <= w0 && w0 + 15 < T;
        const int lim[2] = {rows[0] < T ? rows[0] - k0 : -1, rows[1] < T ? rows[1] - k0 : -1};
#pragma unroll
        for (int n = 0; n < NS; n++)
#pragma unroll
          for (int e = 0; e < 4; e++)
            s[n][e] = (whole || n * 8 + 2 * qd + (e & 1) <= lim[e >> 1]) ? exp2f(s[n][e] * sl2 - rl[e >> 1]) : 0.f;
        if (DROP && thr != 0)
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
        attn_mma_rounded<H, S>(acc, s, sK);  // dq += dS K
      }
    }
  }
  const bool wide = hd == HD && (rsi & 1) == 0 && ((uintptr_t)(dq + base) & 7) == 0;
#pragma unroll
  for (int i = 0; i < 2; i++) {
    if (rows[i] >= T) continue;
#pragma unroll
    for (int nd = 0; nd < ND; nd++)
      attn_store2(dq + base, rows[i], nd * 8 + 2 * qd, hd, rsi, wide, acc[nd][2 * i] * scale,
                  acc[nd][2 * i + 1] * scale);
  }
}

// backward_dkdv reads dout as backward_dq rounded it (doh).
template <typename H, int HD, bool DROP, class C = Attn3Dkv<HD, DROP, Attn3K<H>::k>>
__device__ void attn_backward_dkdv_mma3(float* dk, float* dv, const H* q, const H* k, const H* v, const H* doh,
                                        const float* lse, const float* delta, i64 nbh, i64 t, int hd, int nh,
                                        int rsi, float scale, u64 seed, u64 offset, u64 thr, float dscale) {
  constexpr int W = C::W, NT = 32 * W, KB = 16 * W, QB = C::BN, S = HD + Tc<H>::PAD, KD = HD / 16, NQ = QB / 8, ND = HD / 8;
  constexpr bool RES = C::RES;
  constexpr int STAGE = 2 * QB * S, KV = 2 * KB * S;
  constexpr int SMEM = RES ? KV + 2 * STAGE : KV > 2 * STAGE ? KV : 2 * STAGE;
  static_assert(SMEM * (int)sizeof(H) + 4 * QB * 4 <= 48 * 1024, "static shared memory");
  static_assert(QB <= NT, "a thread copies each row's lse and delta");
  // The K and V tiles, then (at KV when RES, else in their place) two
  // stages of (Q tile, dout tile).
  __shared__ __align__(128) H sm[SMEM];
  __shared__ __align__(16) float sL[2][QB], sD[2][QB];
  __shared__ i64 sBase;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, qd = lane & 3;
  const i64 h = blockIdx.x % nbh;
  const int k0 = (int)(blockIdx.x / nbh) * KB, T = (int)t;  // the first key tiles have the most rows
  // q, k, v, dk and dv's head (doh is contiguous), read from shared
  // memory: kept in registers across the loop it made the kernel spill
  // (h * t * hd, before the layouts, was recomputed instead).
  if (tid == 0) sBase = attn_head(h, t, hd, nh, rsi);
  __syncthreads();
  const i64 base = sBase;
  const bool fast = hd == HD && (rsi & (Tc<H>::E - 1)) == 0 && attn_aligned(q + base) && attn_aligned(k + base) &&
                    attn_aligned(v + base) && attn_aligned(doh + h * t * hd);
  attn_tile<KB, HD, S, NT>(sm, k + base, (i64)k0, t, hd, (i64)rsi, fast);
  attn_tile<KB, HD, S, NT>(sm + KB * S, v + base, (i64)k0, t, hd, (i64)rsi, fast);
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();
  u32 ka[RES ? 1 : KD][Tc<H>::A], va[RES ? 1 : KD][Tc<H>::A];
  if constexpr (!RES) {
#pragma unroll
    for (int kd = 0; kd < KD; kd++) {
      tc_lda<S>(ka[kd], sm, warp * 16, kd * 16);
      tc_lda<S>(va[kd], sm + KB * S, warp * 16, kd * 16);
    }
    __syncthreads();
  }
  H* const stages = sm + (RES ? KV : 0);
  const int qs = (k0 / QB) * QB;  // the first query tile with a row at or after k0
  const int nt = (T - qs + QB - 1) / QB;
  // Streamed tiles are addressed from the kernel's parameters and two
  // offsets, not from four head pointers: registers for the row stride.
  const i64 ht = h * t;
  auto load_q = [&](int it) {
    H* st = stages + (it & 1) * STAGE;
    const int q0 = qs + it * QB;
    attn_tile<QB, HD, S, NT>(st, q + base, q0, T, hd, rsi, fast);
    attn_tile_contig<QB, HD, S, NT>(st + QB * S, doh + ht * hd, q0, T, hd, fast);
    if (tid < QB) {
      const int row = q0 + tid, r = row < T ? row : 0;
      cp_async4(&sL[it & 1][tid], lse + ht + r, row < T);
      cp_async4(&sD[it & 1][tid], delta + ht + r, row < T);
    }
    cp_async_commit();
  };
  load_q(0);
  const float sl2 = scale * ATTN_LOG2E;
  const int w0 = k0 + warp * 16;  // the warp's first key
  const int keys[2] = {w0 + g, w0 + g + 8};
  float gk[ND][4], gv[ND][4];
#pragma unroll
  for (int nd = 0; nd < ND; nd++)
#pragma unroll
    for (int e = 0; e < 4; e++) gk[nd][e] = gv[nd][e] = 0.f;
  for (int it = 0; it < nt; it++) {
    const int q0 = qs + it * QB;
    cp_async_wait<0>();
    __syncthreads();  // tile it is in for every thread; tile it-1's stage is free
    if (it + 1 < nt) load_q(it + 1);
    const H* sQ = stages + (it & 1) * STAGE;
    const H* sDO = sQ + QB * S;
    const float* rl = sL[it & 1];
    const float* rd = sD[it & 1];
    if (w0 <= q0 + QB - 1 && w0 < T) {  // else the warp's keys all come after the tile's rows
      float s[NQ][4], dp[NQ][4];        // transposed: [key][query]
#pragma unroll
      for (int n = 0; n < NQ; n++)
#pragma unroll
        for (int e = 0; e < 4; e++) s[n][e] = dp[n][e] = 0.f;
#pragma unroll
      for (int kd = 0; kd < KD; kd++) {
        u32 a[Tc<H>::A], av[Tc<H>::A];
        if constexpr (RES) {
          tc_lda<S>(a, sm, warp * 16, kd * 16);
          tc_lda<S>(av, sm + KB * S, warp * 16, kd * 16);
        } else {
#pragma unroll
          for (int j = 0; j < Tc<H>::A; j++) a[j] = ka[kd][j], av[j] = va[kd][j];
        }
#pragma unroll
        for (int n = 0; n < NQ; n += 2) {
          u32 b[Tc<H>::B];
          tc_ldb<S>(b, sQ, n * 8, kd * 16);
          tc_mma2<H>(s[n], s[n + 1], a, b);
          tc_ldb<S>(b, sDO, n * 8, kd * 16);
          tc_mma2<H>(dp[n], dp[n + 1], av, b);
        }
      }
      const bool whole = q0 >= w0 + 15 && q0 + QB - 1 < T;
      const int first[2] = {keys[0] - q0, keys[1] - q0};  // a key's first row in the tile
      const int end = min(QB, T - q0);                   // rows past t
#pragma unroll
      for (int n = 0; n < NQ; n++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
          const int r = n * 8 + 2 * qd + (e & 1);
          const float p = (whole || (first[e >> 1] <= r && r < end)) ? exp2f(s[n][e] * sl2 - rl[r] * ATTN_LOG2E) : 0.f;
          s[n][e] = p;
        }
      if (DROP && thr != 0) {
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
        u32 pa[Tc<H>::A], da[Tc<H>::A];
        tc_acc_to_a<H>(pa, s[2 * j], s[2 * j + 1]);
        tc_acc_to_a<H>(da, dp[2 * j], dp[2 * j + 1]);
#pragma unroll
        for (int nd = 0; nd < ND; nd += 2) {
          u32 b[Tc<H>::B];
          tc_ldbt<S>(b, sDO, nd * 8, j * 16);
          tc_mma2<H>(gv[nd], gv[nd + 1], pa, b);
          tc_ldbt<S>(b, sQ, nd * 8, j * 16);
          tc_mma2<H>(gk[nd], gk[nd + 1], da, b);
        }
      }
    }
  }
  const bool wide = hd == HD && (rsi & 1) == 0 && ((uintptr_t)(dk + base) & 7) == 0 && ((uintptr_t)(dv + base) & 7) == 0;
#pragma unroll
  for (int i = 0; i < 2; i++) {
    if (keys[i] >= T) continue;
#pragma unroll
    for (int nd = 0; nd < ND; nd++) {
      const int d = nd * 8 + 2 * qd;
      attn_store2(dk + base, keys[i], d, hd, rsi, wide, gk[nd][2 * i] * scale, gk[nd][2 * i + 1] * scale);
      attn_store2(dv + base, keys[i], d, hd, rsi, wide, gv[nd][2 * i], gv[nd][2 * i + 1]);
    }
  }
}

#ifndef ATTN_MMA3_NO_KERNELS
#define ATTENTION_MMA3_KERNELS(name, DROP, sfx, H, HD)                                                             \
  extern "C" __global__ void __launch_bounds__(32 * Attn3Fwd<HD, DROP, Attn3K<H>::k>::W, Attn3Fwd<HD, DROP, Attn3K<H>::k>::MINB)               \
      attention_forward_##name##_##sfx##_h##HD(float* out, float* lse, const H* q, const H* k, const H* v, i64 nbh, \
                                               i64 t, int hd, int nh, int rsi, int rso, float scale, u64 seed,      \
                                               u64 offset, u64 thr, float dscale) {                                 \
    attn_forward_mma3<H, HD, DROP>(out, lse, q, k, v, nbh, t, hd, nh, rsi, rso, scale, seed, offset, thr, dscale);  \
  }                                                                                                                 \
  extern "C" __global__ void __launch_bounds__(32 * Attn3Dq<HD, DROP, Attn3K<H>::k>::W, Attn3Dq<HD, DROP, Attn3K<H>::k>::MINB)                 \
      attention_backward_dq_##name##_##sfx##_h##HD(float* dq, float* delta, H* doh, const H* q, const H* k,        \
                                                   const H* v, const float* out, const float* dout,                 \
                                                   const float* lse, i64 nbh, i64 t, int hd, int nh, int rsi,       \
                                                   int rso, float scale, u64 seed, u64 offset, u64 thr,             \
                                                   float dscale) {                                                  \
    attn_backward_dq_mma3<H, HD, DROP>(dq, delta, doh, q, k, v, out, dout, lse, nbh, t, hd, nh, rsi, rso, scale,    \
                                       seed, offset, thr, dscale);                                                  \
  }                                                                                                                 \
  extern "C" __global__ void __launch_bounds__(32 * Attn3Dkv<HD, DROP, Attn3K<H>::k>::W, Attn3Dkv<HD, DROP, Attn3K<H>::k>::MINB)               \
      attention_backward_dkdv_##name##_##sfx##_h##HD(float* dk, float* dv, const H* q, const H* k, const H* v,     \
                                                     const H* doh, const float* lse, const float* delta, i64 nbh,  \
                                                     i64 t, int hd, int nh, int rsi, float scale, u64 seed,         \
                                                     u64 offset, u64 thr, float dscale) {                           \
    attn_backward_dkdv_mma3<H, HD, DROP>(dk, dv, q, k, v, doh, lse, delta, nbh, t, hd, nh, rsi, scale, seed,        \
                                         offset, thr, dscale);                                                      \
  }

#define ATTENTION_MMA3_KERNELS_ALL_HD(sfx, H)          \
  ATTENTION_MMA3_KERNELS(mma3, false, sfx, H, 16)      \
  ATTENTION_MMA3_KERNELS(mma3, false, sfx, H, 32)      \
  ATTENTION_MMA3_KERNELS(mma3, false, sfx, H, 64)      \
  ATTENTION_MMA3_KERNELS(mma3, false, sfx, H, 128)     \
  ATTENTION_MMA3_KERNELS(mma3drop, true, sfx, H, 16)   \
  ATTENTION_MMA3_KERNELS(mma3drop, true, sfx, H, 32)   \
  ATTENTION_MMA3_KERNELS(mma3drop, true, sfx, H, 64)   \
  ATTENTION_MMA3_KERNELS(mma3drop, true, sfx, H, 128)

ATTENTION_MMA3_KERNELS_ALL_HD(f16, __half)
ATTENTION_MMA3_KERNELS_ALL_HD(bf16, __nv_bfloat16)
// Float32 inputs on TF32 tensor cores, HD 16, 32 and 64: rounded to TF32
// (tf32), and in three TF32 products (tf32x3).
#define ATTENTION_MMA3_KERNELS_F32(sfx, H)        \
  ATTENTION_MMA3_KERNELS(mma3, false, sfx, H, 16)    \
  ATTENTION_MMA3_KERNELS(mma3, false, sfx, H, 32)    \
  ATTENTION_MMA3_KERNELS(mma3, false, sfx, H, 64)    \
  ATTENTION_MMA3_KERNELS(mma3drop, true, sfx, H, 16) \
  ATTENTION_MMA3_KERNELS(mma3drop, true, sfx, H, 32) \
  ATTENTION_MMA3_KERNELS(mma3drop, true, sfx, H, 64)
ATTENTION_MMA3_KERNELS_F32(tf32, float)
ATTENTION_MMA3_KERNELS_F32(tf32x3, f32x3)
#endif
