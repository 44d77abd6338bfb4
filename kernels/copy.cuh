// copy.cuh: strided gathers into contiguous memory, a tiled transpose, and
// 2-D block copies. Elements are moved as raw 2-, 4- or 8-byte words, so
// one kernel serves every dtype of that size.
#pragma once
#include "common.cuh"

// offset_of maps the linear index i of the contiguous destination to the
// element offset of a strided view. I is the index type: 32-bit division
// when the element count allows it (much cheaper), 64-bit otherwise.
template <typename I>
__device__ __forceinline__ i64 offset_of(I i, const Layout1& l) {
  i64 off = 0;
  for (int d = l.ndim - 1; d > 0; d--) {
    I s = (I)l.shape[d];
    I q = i / s;
    off += (i64)(i - q * s) * l.str[d];
    i = q;
  }
  return off + (i64)i * l.str[0];
}

template <typename U, typename I>
__device__ __forceinline__ void copy_strided(U* dst, const U* src, i64 n, const Layout1& l) {
  FOR_N(i, n) dst[i] = src[offset_of<I>((I)i, l)];
}

// copy_transpose handles views whose two innermost dims (R, C) have source
// strides (1, s): each R x C matrix of dst is the transpose of a block of
// src with contiguous columns (x.T, and the attention permutes). A 32 x 33
// shared tile makes both the reads and the writes coalesced. The dims
// before the last two index the matrices; grid.z walks them.
#define TILE 32
template <typename U>
__device__ __forceinline__ void copy_transpose(U* dst, const U* src, const Layout1& l) {
  __shared__ U tile[TILE][TILE + 1];
  const i64 R = l.shape[l.ndim - 2], C = l.shape[l.ndim - 1], s = l.str[l.ndim - 1];
  i64 mats = 1;
  for (int d = 0; d < l.ndim - 2; d++) mats *= l.shape[d];
  const i64 r0 = (i64)blockIdx.y * TILE, c0 = (i64)blockIdx.x * TILE;
  for (i64 m = blockIdx.z; m < mats; m += gridDim.z) {
    i64 base = 0, q = m;
    for (int d = l.ndim - 3; d >= 0; d--) {
      base += (q % l.shape[d]) * l.str[d];
      q /= l.shape[d];
    }
    // Read: threadIdx.x runs along r, where the source is contiguous.
    for (int k = threadIdx.y; k < TILE; k += blockDim.y) {
      i64 r = r0 + threadIdx.x, c = c0 + k;
      if (r < R && c < C) tile[k][threadIdx.x] = src[base + r + c * s];
    }
    __syncthreads();
    // Write: threadIdx.x runs along c, where the destination is contiguous.
    U* d = dst + m * R * C;
    for (int k = threadIdx.y; k < TILE; k += blockDim.y) {
      i64 r = r0 + k, c = c0 + threadIdx.x;
      if (r < R && c < C) d[r * C + c] = tile[threadIdx.x][k];
    }
    __syncthreads();
  }
}

// copy2d copies rows blocks of width elements between row strides.
template <typename U>
__device__ __forceinline__ void copy2d(U* dst, const U* src, i64 rows, i64 width, i64 dstStride, i64 srcStride) {
  FOR_N(i, rows * width) {
    i64 r = i / width, c = i - r * width;
    dst[r * dstStride + c] = src[r * srcStride + c];
  }
}

#define COPY_KERNELS(b, U)                                                                                    \
  extern "C" __global__ void __launch_bounds__(256)                                                          \
      copy_strided_##b##_i32(U* dst, const U* src, i64 n, Layout1 l) {                                      \
    copy_strided<U, unsigned int>(dst, src, n, l);                                                          \
  }                                                                                                          \
  extern "C" __global__ void __launch_bounds__(256)                                                          \
      copy_strided_##b##_i64(U* dst, const U* src, i64 n, Layout1 l) {                                      \
    copy_strided<U, u64>(dst, src, n, l);                                                                    \
  }                                                                                                          \
  extern "C" __global__ void __launch_bounds__(256) copy_transpose_##b(U* dst, const U* src, Layout1 l) {   \
    copy_transpose<U>(dst, src, l);                                                                          \
  }                                                                                                          \
  extern "C" __global__ void __launch_bounds__(256)                                                          \
      copy2d_##b(U* dst, const U* src, i64 rows, i64 width, i64 dstStride, i64 srcStride) {                \
    copy2d<U>(dst, src, rows, width, dstStride, srcStride);                                                 \
  }

COPY_KERNELS(b2, uint16_t)
COPY_KERNELS(b4, uint32_t)
COPY_KERNELS(b8, u64)

// 16-byte words: the Go side folds groups of 2-, 4- or 8-byte elements
// into one word when a view's rows are contiguous runs of a multiple of 16
// bytes at 16-byte-aligned addresses (the attention's head split and
// merge, narrowed columns), so each thread moves 16 bytes and does one
// index computation for them (cudaBackend.copyStrided, widenLayout).
extern "C" __global__ void __launch_bounds__(256) copy_strided_b16_i32(uint4* dst, const uint4* src, i64 n, Layout1 l) {
  copy_strided<uint4, unsigned int>(dst, src, n, l);
}
extern "C" __global__ void __launch_bounds__(256) copy_strided_b16_i64(uint4* dst, const uint4* src, i64 n, Layout1 l) {
  copy_strided<uint4, u64>(dst, src, n, l);
}
