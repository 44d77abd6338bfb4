// reduce.cuh: sums and maxima over the middle of an (outer, mid, inner)
// view, and the sum of squares. Everything accumulates in double, as the
// CPU does, and nothing uses atomics: when one block per output would
// leave the GPU idle (a bias gradient: outer 1, mid = batch*time), mid is
// cut into chunks whose double partials land in a scratch buffer and a
// second kernel adds them in chunk order. Chunking depends only on the
// sizes, so results are identical run to run.
//
// Partial layout: partial[c * total + j], chunk c, output j = o*inner + i.
#pragma once
#include "common.cuh"
#include "cast.cuh"

template <typename Op>
__device__ __forceinline__ double reduce_identity();
template <>
__device__ __forceinline__ double reduce_identity<SumOp>() { return 0.0; }
template <>
__device__ __forceinline__ double reduce_identity<MaxNaN>() { return -INFINITY; }

// store writes a finished output: dst = T(v), or T(dst + v) to accumulate.
template <typename T>
__device__ __forceinline__ void store(T* dst, double v, int acc) {
  *dst = acc ? (T)((double)*dst + v) : (T)v;
}

// reduce_rows: inner == 1, each row of mid contiguous elements is reduced
// by a block; grid (chunks, min(outer, 65535)).
template <typename T, typename Op>
__device__ void reduce_rows(T* dst, double* partial, const T* src, i64 outer, i64 mid, i64 chunkLen, int acc) {
  Op op;
  double* sh = shared_scratch<double>();
  const i64 lo = (i64)blockIdx.x * chunkLen, hi = min(mid, lo + chunkLen);
  for (i64 o = blockIdx.y; o < outer; o += gridDim.y) {
    const T* row = src + o * mid;
    double v = reduce_identity<Op>();
    for (i64 m = lo + threadIdx.x; m < hi; m += blockDim.x) v = op(v, (double)row[m]);
    v = block_reduce(v, sh, op, reduce_identity<Op>());
    if (threadIdx.x == 0) {
      if (gridDim.x == 1) {
        store(dst + o, v, acc);
      } else {
        partial[(i64)blockIdx.x * outer + o] = v;
      }
    }
  }
}

// reduce_cols: inner > 1; a 32 x 8 block reduces 32 adjacent outputs,
// threadIdx.x along inner (coalesced) and threadIdx.y striding mid; grid
// (ceil(inner/32), min(outer, 65535), chunks).
template <typename T, typename Op>
__device__ void reduce_cols(T* dst, double* partial, const T* src, i64 outer, i64 mid, i64 inner, i64 chunkLen,
                            int acc) {
  Op op;
  __shared__ double sh[8][33];
  const i64 i = (i64)blockIdx.x * 32 + threadIdx.x;
  const i64 lo = (i64)blockIdx.z * chunkLen, hi = min(mid, lo + chunkLen);
  for (i64 o = blockIdx.y; o < outer; o += gridDim.y) {
    double v = reduce_identity<Op>();
    if (i < inner) {
      const T* base = src + o * mid * inner + i;
      for (i64 m = lo + threadIdx.y; m < hi; m += blockDim.y) v = op(v, (double)base[m * inner]);
    }
    sh[threadIdx.y][threadIdx.x] = v;
    __syncthreads();
    if (threadIdx.y == 0 && i < inner) {
      for (int k = 1; k < blockDim.y; k++) v = op(v, sh[k][threadIdx.x]);
      if (gridDim.z == 1) {
        store(dst + o * inner + i, v, acc);
      } else {
        partial[((i64)blockIdx.z * outer + o) * inner + i] = v;
      }
    }
    __syncthreads();
  }
}

// reduce_final adds (or maxes) the chunks' partials in chunk order.
template <typename T, typename Op>
__device__ void reduce_final(T* dst, const double* partial, i64 total, int chunks, int acc) {
  Op op;
  FOR_N(j, total) {
    double v = partial[j];
    for (int c = 1; c < chunks; c++) v = op(v, partial[(i64)c * total + j]);
    store(dst + j, v, acc);
  }
}

// sum_squares reduces chunk blockIdx.x of x into partial[blockIdx.x];
// without partials (one chunk, one tensor) it writes the result straight
// into the status block's scalar slot. SumSquaresAll gives every tensor
// its run of one shared partials array and sums them all at once.
template <typename T>
__device__ void sum_squares(Status* st, double* partial, const T* x, i64 n, i64 chunkLen) {
  double* sh = shared_scratch<double>();
  const i64 lo = (i64)blockIdx.x * chunkLen, hi = min(n, lo + chunkLen);
  double v = 0;
  for (i64 m = lo + threadIdx.x; m < hi; m += blockDim.x) {
    double f = (double)x[m];
    v += f * f;
  }
  v = block_reduce(v, sh, SumOp(), 0.0);
  if (threadIdx.x == 0) {
    if (partial == nullptr) {
      st->scalar = v;
    } else {
      partial[blockIdx.x] = v;
    }
  }
}

// SqChunk is one block's share of a multi-tensor sum of squares: the
// elements [lo, hi) of x, summed into partial[slot]. The chunks and slots
// are sum_squares' (tensor by tensor, chunk by chunk), so one launch for
// many tensors gives the partials, hence the sum, of one launch a tensor.
struct SqChunk {
  const void* x;
  i64 lo, hi, slot;
};

// sq_at is element m widened to double: exactly, from a half type too
// (gradients kept in bf16 or f16: the sum of squares of their values, as
// the float32 path gives for the same values).
template <typename T>
__device__ __forceinline__ double sq_at(const T* x, i64 m) { return (double)x[m]; }
__device__ __forceinline__ double sq_at(const BF16* x, i64 m) { return (double)widen(x[m]); }
__device__ __forceinline__ double sq_at(const F16* x, i64 m) { return (double)widen(x[m]); }

template <typename T>
__device__ void sum_squares_multi(double* partial, const SqChunk* chunks) {
  double* sh = shared_scratch<double>();
  const SqChunk c = chunks[blockIdx.x];
  const T* x = (const T*)c.x;
  double v = 0;
  for (i64 m = c.lo + threadIdx.x; m < c.hi; m += blockDim.x) {
    double f = sq_at(x, m);
    v += f * f;
  }
  v = block_reduce(v, sh, SumOp(), 0.0);
  if (threadIdx.x == 0) partial[c.slot] = v;
}

#define REDUCE_KERNELS(sfx, T)                                                                            \
  extern "C" __global__ void __launch_bounds__(256) reduce_rows_sum_##sfx(                                \
      T* dst, double* partial, const T* src, i64 outer, i64 mid, i64 chunkLen, int acc) {                 \
    reduce_rows<T, SumOp>(dst, partial, src, outer, mid, chunkLen, acc);                                  \
  }                                                                                                       \
  extern "C" __global__ void __launch_bounds__(256) reduce_rows_max_##sfx(                                \
      T* dst, double* partial, const T* src, i64 outer, i64 mid, i64 chunkLen, int acc) {                 \
    reduce_rows<T, MaxNaN>(dst, partial, src, outer, mid, chunkLen, acc);                                 \
  }                                                                                                       \
  extern "C" __global__ void __launch_bounds__(256) reduce_cols_sum_##sfx(                                \
      T* dst, double* partial, const T* src, i64 outer, i64 mid, i64 inner, i64 chunkLen, int acc) {      \
    reduce_cols<T, SumOp>(dst, partial, src, outer, mid, inner, chunkLen, acc);                           \
  }                                                                                                       \
  extern "C" __global__ void __launch_bounds__(256) reduce_cols_max_##sfx(                                \
      T* dst, double* partial, const T* src, i64 outer, i64 mid, i64 inner, i64 chunkLen, int acc) {      \
    reduce_cols<T, MaxNaN>(dst, partial, src, outer, mid, inner, chunkLen, acc);                          \
  }                                                                                                       \
  extern "C" __global__ void __launch_bounds__(256) reduce_final_sum_##sfx(                               \
      T* dst, const double* partial, i64 total, int chunks, int acc) {                                    \
    reduce_final<T, SumOp>(dst, partial, total, chunks, acc);                                             \
  }                                                                                                       \
  extern "C" __global__ void __launch_bounds__(256) reduce_final_max_##sfx(                               \
      T* dst, const double* partial, i64 total, int chunks, int acc) {                                    \
    reduce_final<T, MaxNaN>(dst, partial, total, chunks, acc);                                            \
  }                                                                                                       \
  extern "C" __global__ void __launch_bounds__(256) sum_squares_##sfx(                                    \
      Status* st, double* partial, const T* x, i64 n, i64 chunkLen) {                                     \
    sum_squares<T>(st, partial, x, n, chunkLen);                                                          \
  }                                                                                                       \
  extern "C" __global__ void __launch_bounds__(256) sum_squares_multi_##sfx(double* partial,              \
                                                                            const SqChunk* chunks) {      \
    sum_squares_multi<T>(partial, chunks);                                                                \
  }

REDUCE_KERNELS(f32, float)
REDUCE_KERNELS(f64, double)

// The multi-tensor sum of squares of half tensors (gradients kept in bf16
// or f16), into the same partials as the float launches beside it.
extern "C" __global__ void __launch_bounds__(256) sum_squares_multi_bf16(double* partial, const SqChunk* chunks) {
  sum_squares_multi<BF16>(partial, chunks);
}
extern "C" __global__ void __launch_bounds__(256) sum_squares_multi_f16(double* partial, const SqChunk* chunks) {
  sum_squares_multi<F16>(partial, chunks);
}

// sum_partials adds the chunk partials of sum_squares into the status
// block's scalar slot (one block; fixed order).
extern "C" __global__ void __launch_bounds__(256) sum_partials(Status* st, const double* partial, int chunks) {
  double* sh = shared_scratch<double>();
  double v = 0;
  for (int c = threadIdx.x; c < chunks; c += blockDim.x) v += partial[c];
  v = block_reduce(v, sh, SumOp(), 0.0);
  if (threadIdx.x == 0) st->scalar = v;
}

// mean_divisor writes n into out[0], n the rows whose target is not the
// ignore index, or 1 when there are none (one block): the divisor of a
// mean cross-entropy, as PyTorch divides its sum by the count, without
// the host reading the count; 1 keeps an empty sum's 0.
template <typename T>
__device__ void mean_divisor(T* out, const int* targets, i64 rows, int ignore) {
  i64* sh = shared_scratch<i64>();
  i64 v = 0;
  for (i64 r = threadIdx.x; r < rows; r += blockDim.x) v += targets[r] != ignore;
  v = block_reduce(v, sh, SumOp(), (i64)0);
  if (threadIdx.x == 0) out[0] = v > 0 ? (T)v : (T)1;
}
extern "C" __global__ void __launch_bounds__(1024) mean_divisor_f32(float* out, const int* targets, i64 rows, int ignore) {
  mean_divisor<float>(out, targets, rows, ignore);
}
extern "C" __global__ void __launch_bounds__(1024) mean_divisor_f64(double* out, const int* targets, i64 rows, int ignore) {
  mean_divisor<double>(out, targets, rows, ignore);
}

// count_targets counts the rows whose target is not the ignore index into
// the status block's count slot (one block).
extern "C" __global__ void __launch_bounds__(1024) count_targets(Status* st, const int* targets, i64 rows, int ignore) {
  i64* sh = shared_scratch<i64>();
  i64 v = 0;
  for (i64 r = threadIdx.x; r < rows; r += blockDim.x) v += targets[r] != ignore;
  v = block_reduce(v, sh, SumOp(), (i64)0);
  if (threadIdx.x == 0) st->count = v;
}
