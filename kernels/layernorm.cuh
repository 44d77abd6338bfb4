// layernorm.cuh: layer norm over the last axis, forward and backward, as
// cpukern/layernorm.go: statistics in two passes (mean, then squared
// deviations), biased variance, rstd = 1/sqrt(var + eps); w and b are
// optional (null pointers). A warp handles a row.
//
// Two paths. The general one (any dtype, any width) computes in double
// and reads the row once per pass. The register path (float32 x, rows of
// a multiple of 4 columns up to 128 LN_MAXV, 16-byte aligned) is what
// GPT-style models take: the warp loads its row once, lane l holding the
// float4 words l, l+32, ..., and does the arithmetic in float32, the
// row's sums in a fixed tree (ln_reg_ok decides; the forward checks on the
// device, since the Go side launches one kernel either way). Per element
// the general path's double conversions (16 a clock per multiprocessor on
// sm_90) held GPT-2's norms to a third of the memory's bandwidth (ncu: the
// forward 24.6 us, the backward's dx 37 us and its dw/db partials 26 us a
// norm at B8 T1024 C768, where the bytes take 9 and 19).
//
// The backward writes dx per row and, when dw or db are wanted, reduces
// dy*xhat and dy over rows deterministically into double partials, one
// (2, cols) slab a chunk of rows, which layernorm_dwdb_final adds in
// order into dw and db. The general path runs the partials as a kernel of
// their own (blocks of 32 columns x 8 row-threads, fixed row chunks); the
// register path accumulates them as it goes (layernorm_backward_reg: each
// lane sums its columns over the rows its warp handles, then the block's
// eight warps add theirs in warp order), so x and dy are read once.
#pragma once
#include "common.cuh"
#include "cast.cuh"

// layernorm writes y as Y: Y = T, or a half type rounded as the cast
// kernels round (layernorm_to: a norm whose output feeds only
// half-precision products, which would cast it anyway).
template <typename T, typename Y>
__device__ void layernorm(Y* y, T* mean, T* rstd, const T* x, const T* w, const T* b, i64 rows, i64 cols,
                          double eps) {
  RowGroup<true> g;
  for (i64 r = g.row; r < rows; r += g.rowStride) {
    const T* xr = x + r * cols;
    Y* yr = y + r * cols;
    double s = 0;
    for (i64 c = g.rank; c < cols; c += g.size) s += (double)xr[c];
    double mu = g.sum(s, (double*)nullptr) / (double)cols;
    if constexpr (sizeof(T) == 8) {
      // cpukern's corrected two-pass mean for float64 rows (float32 ones
      // sum exactly enough in double): the mean of the deviations from the
      // rounded sum's mean corrects it, so that a row of one value, 1e30,
      // normalises to 0, not +-1 (its mean an ulp off, a variance of an ulp
      // squared).
      double dev = 0;
      for (i64 c = g.rank; c < cols; c += g.size) dev += (double)xr[c] - mu;
      mu += g.sum(dev, (double*)nullptr) / (double)cols;
    }
    double v = 0;
    for (i64 c = g.rank; c < cols; c += g.size) {
      double d = (double)xr[c] - mu;
      v += d * d;
    }
    v = g.sum(v, (double*)nullptr) / (double)cols;
    const double rs = 1.0 / sqrt(v + eps);
    if (g.rank == 0) {
      mean[r] = (T)mu;
      rstd[r] = (T)rs;
    }
    // x - mean as the CPU takes it: the mean's rounding to T, then the
    // rest (rows far from zero against their spread keep their accuracy).
    const T m = (T)mu, ml = (T)(mu - (double)m), st = (T)rs;
    for (i64 c = g.rank; c < cols; c += g.size) {
      T val = ((xr[c] - m) - ml) * st;
      if (w) val = val * w[c];
      if (b) val = val + b[c];
      store_as(yr + c, val);
    }
  }
}

// layernorm_backward_dx: dx = rstd (g - mean(g) - xhat mean(g xhat)),
// g = dy * w (dy without w), xhat = (x - mean) rstd, all in double.
template <typename T>
__device__ void layernorm_backward_dx(T* dx, const T* dy, const T* x, const T* mean, const T* rstd, const T* w,
                                      i64 rows, i64 cols) {
  RowGroup<true> g;
  const double n = (double)cols;
  for (i64 r = g.row; r < rows; r += g.rowStride) {
    const T *xr = x + r * cols, *gr = dy + r * cols;
    T* d = dx + r * cols;
    const double rs = (double)rstd[r];
    double m = (double)mean[r];
    if (fabs(m * rs) > 1) {  // the mean's rounding moves xhat by over an ulp: the row's exact mean, as the CPU
      double s = 0;
      for (i64 c = g.rank; c < cols; c += g.size) s += (double)xr[c];
      m = g.sum(s, (double*)nullptr) / n;
    }
    double sg = 0, sgx = 0;
    for (i64 c = g.rank; c < cols; c += g.size) {
      double xh = ((double)xr[c] - m) * rs;
      double gw = w ? (double)gr[c] * (double)w[c] : (double)gr[c];
      sg += gw;
      sgx += gw * xh;
    }
    const double c1 = g.sum(sg, (double*)nullptr) / n, c2 = g.sum(sgx, (double*)nullptr) / n;
    for (i64 c = g.rank; c < cols; c += g.size) {
      double xh = ((double)xr[c] - m) * rs;
      double gw = w ? (double)gr[c] * (double)w[c] : (double)gr[c];
      d[c] = (T)(rs * (gw - c1 - xh * c2));
    }
  }
}

// layernorm_dwdb_partial: grid (ceil(cols/32), chunks), block 32 x 8.
// partial[(2c) * cols + i] = sum over chunk c's rows of dy * xhat, and
// partial[(2c+1) * cols + i] = sum of dy.
template <typename T>
__device__ void layernorm_dwdb_partial(double* partial, const T* dy, const T* x, const T* mean, const T* rstd,
                                       i64 rows, i64 cols, i64 rowsPerChunk) {
  __shared__ double shw[8][33], shb[8][33];
  const i64 i = (i64)blockIdx.x * 32 + threadIdx.x;
  const i64 lo = (i64)blockIdx.y * rowsPerChunk, hi = min(rows, lo + rowsPerChunk);
  double aw = 0, ab = 0;
  for (i64 r = lo + threadIdx.y; r < hi; r += blockDim.y) {
    double m = (double)mean[r];
    const double rs = (double)rstd[r];
    if (sizeof(T) == 4 && fabs(m * rs) > 1) {
      // The row's exact mean, as layernorm_backward_dx takes it (the
      // same sum in the same order: the warp is one threadIdx.y, blockDim.x
      // is 32): float32's rounding of the mean moves xhat by over an ulp
      // (double's by far less than the sums lose, so double skips the
      // pass, which reads the row once per block of 32 columns).
      double s = 0;
      for (i64 c = threadIdx.x; c < cols; c += 32) s += (double)x[r * cols + c];
      m = warp_reduce(s, SumOp()) / (double)cols;
    }
    if (i < cols) {
      double gi = (double)dy[r * cols + i];
      aw += gi * ((double)x[r * cols + i] - m) * rs;
      ab += gi;
    }
  }
  shw[threadIdx.y][threadIdx.x] = aw;
  shb[threadIdx.y][threadIdx.x] = ab;
  __syncthreads();
  if (threadIdx.y == 0 && i < cols) {
    for (int k = 1; k < blockDim.y; k++) {
      aw += shw[k][threadIdx.x];
      ab += shb[k][threadIdx.x];
    }
    partial[(2 * (i64)blockIdx.y) * cols + i] = aw;
    partial[(2 * (i64)blockIdx.y + 1) * cols + i] = ab;
  }
}

// layernorm_dwdb_final adds the chunks and writes dw and db (either may be
// null), rounding once: dw = T(sum), so that they need no zero fill
// first. Blocks of 32 columns x LN_FINAL_GROUPS chunk groups: thread
// (column i, group q) sums the chunks q + LN_FINAL_GROUPS (LN_FINAL_ILP k
// + j) of column i, each j into its own sum so that LN_FINAL_ILP loads are
// in flight, the warp's 32 columns in one coalesced read a chunk; it adds
// its sums in j order, then group 0 adds the groups' in q order: the
// result does not depend on timing. (A warp a column, its lanes striding
// over the chunks, read 8 bytes a lane from 32 rows apart: 8 us a norm
// over the register path's 264 chunks of 768 columns; one load in flight
// a thread, 10 us; a thread a column left the sum latency-bound on three
// multiprocessors.)
#define LN_FINAL_GROUPS 16
#define LN_FINAL_ILP 4
template <typename T>
__device__ void layernorm_dwdb_final(T* dw, T* db, const double* partial, i64 cols, int chunks) {
  __shared__ double shw[LN_FINAL_GROUPS][33], shb[LN_FINAL_GROUPS][33];
  const int tx = threadIdx.x & 31, q = threadIdx.x >> 5;
  const i64 i = (i64)blockIdx.x * 32 + tx;
  double sw[LN_FINAL_ILP] = {}, sb[LN_FINAL_ILP] = {};
  if (i < cols) {
    const int step = LN_FINAL_GROUPS * LN_FINAL_ILP;
    for (int c0 = q; c0 < chunks; c0 += step) {
#pragma unroll
      for (int j = 0; j < LN_FINAL_ILP; j++) {
        const int c = c0 + LN_FINAL_GROUPS * j;
        if (c < chunks) {
          sw[j] += partial[(2 * (i64)c) * cols + i];
          sb[j] += partial[(2 * (i64)c + 1) * cols + i];
        }
      }
    }
  }
  double tw = sw[0], tb = sb[0];
#pragma unroll
  for (int j = 1; j < LN_FINAL_ILP; j++) tw += sw[j], tb += sb[j];
  shw[q][tx] = tw;
  shb[q][tx] = tb;
  __syncthreads();
  if (q == 0 && i < cols) {
    for (int k = 1; k < LN_FINAL_GROUPS; k++) tw += shw[k][tx], tb += shb[k][tx];
    if (dw) dw[i] = (T)tw;
    if (db) db[i] = (T)tb;
  }
}

// LN_MAXV bounds the register path: rows of up to 128 LN_MAXV columns.
#define LN_MAXV 8

// ln_reg_ok: the register path applies (float32 rows of a multiple of
// four columns, at most 128 LN_MAXV, every pointer aligned for its
// words; y holds four Y a word).
template <typename Y>
__device__ __forceinline__ bool ln_reg_ok(i64 cols, const Y* y, const float* x, const float* w, const float* b) {
  return cols % 4 == 0 && cols <= 128 * LN_MAXV && aligned_for<Y, 4>(y) && aligned_for<float, 4>(x) &&
         aligned_for<float, 4>(w) && aligned_for<float, 4>(b);
}

// ln_word4 is four float32 of p at word i, or ones (zeros) where p is
// null: an absent weight (bias).
__device__ __forceinline__ Pack<float, 4> ln_word4(const float* p, int i, float absent) {
  if (p) return load_pack<float, 4>(p + 4 * i);
  return Pack<float, 4>{{absent, absent, absent, absent}};
}

// layernorm_reg is layernorm over float32 rows held in registers.
template <typename Y>
__device__ void layernorm_reg(Y* y, float* mean, float* rstd, const float* x, const float* w, const float* b, i64 rows,
                              i64 cols, float eps) {
  RowGroup<true> g;
  const int nw = (int)(cols >> 2);
  const float inv = 1.0f / (float)cols;
  for (i64 r = g.row; r < rows; r += g.rowStride) {
    const float* xr = x + r * cols;
    Pack<float, 4> v[LN_MAXV];
    float s = 0;
#pragma unroll
    for (int k = 0; k < LN_MAXV; k++) {
      const int i = g.rank + 32 * k;
      if (i < nw) {
        v[k] = load_pack<float, 4>(xr + 4 * i);
        s += (v[k].v[0] + v[k].v[1]) + (v[k].v[2] + v[k].v[3]);
      }
    }
    // The float32 sum's mean mu0 can be off by many of its ulps: the
    // deviations from it (exact near mu0) give the rest, and the mean
    // is taken as the CPU takes it, its rounding m and the remainder ml.
    const float mu0 = warp_reduce(s, SumOp()) * inv;
    float e = 0;
#pragma unroll
    for (int k = 0; k < LN_MAXV; k++) {
      if (g.rank + 32 * k < nw) {
#pragma unroll
        for (int j = 0; j < 4; j++) e += v[k].v[j] - mu0;
      }
    }
    const float rest = warp_reduce(e, SumOp()) * inv;
    const float mu = mu0 + rest, ml = (mu0 - mu) + rest;
    float q = 0;
#pragma unroll
    for (int k = 0; k < LN_MAXV; k++) {
      if (g.rank + 32 * k < nw) {
#pragma unroll
        for (int j = 0; j < 4; j++) {
          const float d = (v[k].v[j] - mu) - ml;
          q += d * d;
        }
      }
    }
    const float rs = 1.0f / sqrtf(warp_reduce(q, SumOp()) * inv + eps);
    if (g.rank == 0) {
      mean[r] = mu;
      rstd[r] = rs;
    }
#pragma unroll
    for (int k = 0; k < LN_MAXV; k++) {
      const int i = g.rank + 32 * k;
      if (i < nw) {
        const Pack<float, 4> wv = ln_word4(w, i, 1.0f), bv = ln_word4(b, i, 0.0f);
        Pack<Y, 4> o;
#pragma unroll
        for (int j = 0; j < 4; j++) store_as(&o.v[j], ((v[k].v[j] - mu) - ml) * rs * wv.v[j] + bv.v[j]);
        store_pack<Y, 4>(y + r * cols + 4 * i, o);
      }
    }
  }
}

// layernorm_backward_reg: dx as layernorm_backward_dx, and with partial
// non-null the block's (2, cols) slab of dw/db partial sums (chunk =
// blockIdx.x), over float32 rows of 4 V' columns, V' <= V, held in
// registers. Blocks of 256 threads, a warp a row, rows strided over the
// grid, so a block's rows, and the order they are added in, depend only
// on the grid: the sums are the same run to run.
template <int V>
__device__ void layernorm_backward_reg(float* dx, double* partial, const float* dy, const float* x, const float* mean,
                                       const float* rstd, const float* w, i64 rows, i64 cols) {
  __shared__ float slab[2][128 * V];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  const int nw = (int)(cols >> 2);
  const float inv = 1.0f / (float)cols;
  Pack<float, 4> aw[V], ab[V];
#pragma unroll
  for (int k = 0; k < V; k++) aw[k] = ab[k] = Pack<float, 4>{{0, 0, 0, 0}};
  for (i64 r = (i64)blockIdx.x * warps + warp; r < rows; r += (i64)gridDim.x * warps) {
    const float *xr = x + r * cols, *gr = dy + r * cols;
    Pack<float, 4> xv[V], gv[V];
#pragma unroll
    for (int k = 0; k < V; k++) {
      const int i = lane + 32 * k;
      if (i < nw) xv[k] = load_pack<float, 4>(xr + 4 * i), gv[k] = load_pack<float, 4>(gr + 4 * i);
    }
    const float m = mean[r], rs = rstd[r];
    float ml = 0;  // the rest of the row's mean past its rounding m, where it moves xhat by over an ulp (the CPU's)
    if (fabsf(m * rs) > 1.0f) {
      float e = 0;
#pragma unroll
      for (int k = 0; k < V; k++) {
        if (lane + 32 * k < nw) {
#pragma unroll
          for (int j = 0; j < 4; j++) e += xv[k].v[j] - m;
        }
      }
      ml = warp_reduce(e, SumOp()) * inv;
    }
    float sg = 0, sgx = 0;
#pragma unroll
    for (int k = 0; k < V; k++) {
      const int i = lane + 32 * k;
      if (i < nw) {
        const Pack<float, 4> wv = ln_word4(w, i, 1.0f);
#pragma unroll
        for (int j = 0; j < 4; j++) {
          const float xh = ((xv[k].v[j] - m) - ml) * rs, gw = gv[k].v[j] * wv.v[j];
          sg += gw;
          sgx += gw * xh;
          aw[k].v[j] += gv[k].v[j] * xh;
          ab[k].v[j] += gv[k].v[j];
          xv[k].v[j] = xh;
          gv[k].v[j] = gw;
        }
      }
    }
    const float c1 = warp_reduce(sg, SumOp()) * inv, c2 = warp_reduce(sgx, SumOp()) * inv;
#pragma unroll
    for (int k = 0; k < V; k++) {
      const int i = lane + 32 * k;
      if (i < nw) {
        Pack<float, 4> o;
#pragma unroll
        for (int j = 0; j < 4; j++) o.v[j] = rs * (gv[k].v[j] - c1 - xv[k].v[j] * c2);
        store_pack<float, 4>(dx + r * cols + 4 * i, o);
      }
    }
  }
  if (!partial) return;
  for (int wp = 0; wp < warps; wp++) {  // the warps add their sums in order
    if (warp == wp) {
#pragma unroll
      for (int k = 0; k < V; k++) {
        const int i = lane + 32 * k;
        if (i < nw) {
#pragma unroll
          for (int j = 0; j < 4; j++) {
            const int c = 4 * i + j;
            slab[0][c] = wp == 0 ? aw[k].v[j] : slab[0][c] + aw[k].v[j];
            slab[1][c] = wp == 0 ? ab[k].v[j] : slab[1][c] + ab[k].v[j];
          }
        }
      }
    }
    __syncthreads();
  }
  double* out = partial + 2 * (i64)blockIdx.x * cols;
  for (i64 c = threadIdx.x; c < cols; c += blockDim.x) {
    out[c] = (double)slab[0][c];
    out[cols + c] = (double)slab[1][c];
  }
}

#define LN_BACKWARD_REG(V)                                                                                  \
  extern "C" __global__ void __launch_bounds__(256) layernorm_backward_reg_f32_v##V(                       \
      float* dx, double* partial, const float* dy, const float* x, const float* mean, const float* rstd,     \
      const float* w, i64 rows, i64 cols) {                                                                \
    layernorm_backward_reg<V>(dx, partial, dy, x, mean, rstd, w, rows, cols);                              \
  }
LN_BACKWARD_REG(1)
LN_BACKWARD_REG(2)
LN_BACKWARD_REG(3)
LN_BACKWARD_REG(4)
LN_BACKWARD_REG(5)
LN_BACKWARD_REG(6)
LN_BACKWARD_REG(7)
LN_BACKWARD_REG(8)

// layernorm_any takes the register path where it applies, else the
// general one.
template <typename T, typename Y>
__device__ __forceinline__ void layernorm_any(Y* y, T* mean, T* rstd, const T* x, const T* w, const T* b, i64 rows,
                                              i64 cols, double eps) {
  if constexpr (sizeof(T) == 4) {
    if (ln_reg_ok(cols, y, x, w, b)) return layernorm_reg<Y>(y, mean, rstd, x, w, b, rows, cols, (float)eps);
  }
  layernorm<T, Y>(y, mean, rstd, x, w, b, rows, cols, eps);
}


#define LAYERNORM_KERNELS(sfx, T)                                                                          \
  extern "C" __global__ void __launch_bounds__(256) layernorm_##sfx(                                       \
      T* y, T* mean, T* rstd, const T* x, const T* w, const T* b, i64 rows, i64 cols, double eps) {         \
    layernorm_any<T, T>(y, mean, rstd, x, w, b, rows, cols, eps);                                          \
  }                                                                                                        \
  extern "C" __global__ void __launch_bounds__(256) layernorm_backward_dx_##sfx(                           \
      T* dx, const T* dy, const T* x, const T* mean, const T* rstd, const T* w, i64 rows, i64 cols) {      \
    layernorm_backward_dx<T>(dx, dy, x, mean, rstd, w, rows, cols);                                        \
  }                                                                                                        \
  extern "C" __global__ void __launch_bounds__(256) layernorm_dwdb_partial_##sfx(                          \
      double* partial, const T* dy, const T* x, const T* mean, const T* rstd, i64 rows, i64 cols,          \
      i64 rowsPerChunk) {                                                                                  \
    layernorm_dwdb_partial<T>(partial, dy, x, mean, rstd, rows, cols, rowsPerChunk);                       \
  }                                                                                                        \
  extern "C" __global__ void __launch_bounds__(32 * LN_FINAL_GROUPS)                                       \
      layernorm_dwdb_final_##sfx(T* dw, T* db, const double* partial, i64 cols, int chunks) {              \
    layernorm_dwdb_final<T>(dw, db, partial, cols, chunks);                                                \
  }

LAYERNORM_KERNELS(f32, float)
LAYERNORM_KERNELS(f64, double)

extern "C" __global__ void __launch_bounds__(256) layernorm_to_f32_f16(
    F16* y, float* mean, float* rstd, const float* x, const float* w, const float* b, i64 rows, i64 cols, double eps) {
  layernorm_any<float, F16>(y, mean, rstd, x, w, b, rows, cols, eps);
}
extern "C" __global__ void __launch_bounds__(256) layernorm_to_f32_bf16(
    BF16* y, float* mean, float* rstd, const float* x, const float* w, const float* b, i64 rows, i64 cols, double eps) {
  layernorm_any<float, BF16>(y, mean, rstd, x, w, b, rows, cols, eps);
}
