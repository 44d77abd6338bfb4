// common.cuh: types, index helpers, reductions and the status (error word)
// protocol shared by every kernel of strata's CUDA backend. See all.cu for
// the overview and tensor/doc.go for how the Go side launches these.
#pragma once

#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <stdint.h>

typedef long long i64;
typedef unsigned long long u64;

// MAX_DIMS is the highest rank the strided kernels take after the Go side
// has merged mergeable dims (tensor/internal/layout; tensor/cuda_layout.go
// refuses layouts with more).
#define MAX_DIMS 8

// Layout1 and Layout2 describe strided views, passed by value. The
// destination is contiguous with shape[0..ndim); src (Layout1) or a and b
// (Layout2) have the given element strides, 0 on broadcast dims. The Go
// side writes them byte for byte (layoutBytes1/layoutBytes2): keep the two
// in step.
struct Layout1 {
  int ndim;
  int pad;
  i64 shape[MAX_DIMS];
  i64 str[MAX_DIMS];
};

struct Layout2 {
  int ndim;
  int pad;
  i64 shape[MAX_DIMS];
  i64 sa[MAX_DIMS];
  i64 sb[MAX_DIMS];
};

// Status is the host-visible half of the error-word protocol. It lives in
// mapped pinned host memory (cuMemHostAlloc with DEVICEMAP): kernels store
// into it over the bus and the host reads it after the stream has been
// synchronized, without a copy. The Go mirror is cudaStatusWords.
//
// A kernel that finds bad data (an embedding id or a class target out of
// range) first claims the report with atomicCAS on *claim, a word in
// device memory (atomics on mapped host memory are not atomic for every
// platform), and only the winner writes index, value and limit and then
// code, so the host always sees one consistent report: the first.
struct Status {
  unsigned int code;  // 0: no error; else one of the STATUS_ codes
  unsigned int pad;
  i64 index;          // position of the bad element
  i64 value;          // its value
  i64 limit;          // the size it had to be below
  double scalar;      // result slot of sum_squares
  i64 count;          // result slot of count_targets
};

#define STATUS_GATHER_ID 1
#define STATUS_SCATTER_ID 2
#define STATUS_CE_TARGET 3
#define STATUS_CE_BACKWARD_TARGET 4

__device__ __forceinline__ void report(unsigned int* claim, Status* st, unsigned int code, i64 index, i64 value,
                                       i64 limit) {
  if (atomicCAS(claim, 0u, code) == 0u) {
    st->index = index;
    st->value = value;
    st->limit = limit;
    __threadfence_system();
    st->code = code;
  }
}

// Grid-stride loop over [0, n): every element kernel uses it, so a grid
// capped at the device limit still covers any n.
#define FOR_N(i, n)                                                      \
  for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < (n); \
       i += (i64)gridDim.x * blockDim.x)

// Vectorised element loops. Memory-bound element kernels move 16 bytes a
// thread and access (LDG.128/STG.128) when every pointer they touch is
// aligned for it; a thread then handles V = 16 / sizeof(element)
// consecutive elements, which is what lifts them from about half of the
// H200's bandwidth to most of it. Pack<T, V> is the aligned group;
// map_vec runs fv(i0) over the whole groups (i0 = first element) and f1(i)
// over the remaining elements, grid-stride both, so any grid covers any n
// (the Go side launches ceil(n / (256 V)) blocks: launchVec). When ok is
// false (a view's offset broke the alignment) every element takes f1.
template <typename T, int V>
struct alignas(sizeof(T) * V) Pack {
  T v[V];
};

template <typename T, int V>
__device__ __forceinline__ Pack<T, V> load_pack(const T* p) {
  return *reinterpret_cast<const Pack<T, V>*>(p);
}

template <typename T, int V>
__device__ __forceinline__ void store_pack(T* p, const Pack<T, V>& x) {
  *reinterpret_cast<Pack<T, V>*>(p) = x;
}

// aligned_for reports whether p may be accessed as Pack<T, V>.
template <typename T, int V>
__device__ __forceinline__ bool aligned_for(const void* p) {
  return ((uintptr_t)p & (sizeof(T) * V - 1)) == 0;
}

template <int V, typename FV, typename F1>
__device__ __forceinline__ void map_vec(i64 n, bool ok, FV fv, F1 f1) {
  const i64 stride = (i64)gridDim.x * blockDim.x;
  const i64 tid = (i64)blockIdx.x * blockDim.x + threadIdx.x;
  const i64 nv = ok ? n / V : 0;
  for (i64 j = tid; j < nv; j += stride) fv(j * V);
  for (i64 i = nv * V + tid; i < n; i += stride) f1(i);
}

// Reduction operators. Sum adds; MaxSkipNaN is the CPU's rowMax (a NaN
// never wins, later arithmetic turns the row into NaN anyway); MaxNaN
// propagates NaN, as ReduceMax and torch.amax do.
struct SumOp {
  template <typename T>
  __device__ __forceinline__ T operator()(T a, T b) const { return a + b; }
};
struct MaxSkipNaN {
  template <typename T>
  __device__ __forceinline__ T operator()(T a, T b) const { return b > a ? b : a; }
};
struct MaxNaN {
  template <typename T>
  __device__ __forceinline__ T operator()(T a, T b) const { return (b > a || b != b) ? b : a; }
};

// warp_reduce gives every lane of a full warp the reduction of the 32
// lanes' values; block_reduce gives every thread of the block the
// reduction of all its threads' values (sh must hold 32 values, the whole
// block must call, and identity is op's neutral element). The tree order
// depends only on the launch shape, so results are the same run to run.
template <typename Op, typename T>
__device__ __forceinline__ T warp_reduce(T v, Op op) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

template <typename Op, typename T>
__device__ T block_reduce(T v, T* sh, Op op, T identity) {
  int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
  v = warp_reduce(v, op);
  __syncthreads();  // sh may still be read by a previous call
  if (lane == 0) sh[w] = v;
  __syncthreads();
  v = lane < nw ? sh[lane] : identity;
  return warp_reduce(v, op);
}

// Row kernels run in one of two shapes, chosen by the Go side from the
// row length: a warp per row (WARP = true; 8 rows per 256-thread block),
// or a whole block per row (WARP = false). RowGroup hides the difference:
// it gives the thread's rank and the group size within the row, and sums
// or maxes over the group.
template <bool WARP>
struct RowGroup {
  int rank, size;
  i64 row, rowStride;
  __device__ RowGroup() {
    if (WARP) {
      rank = threadIdx.x & 31;
      size = 32;
      row = (i64)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
      rowStride = (i64)gridDim.x * (blockDim.x >> 5);
    } else {
      rank = threadIdx.x;
      size = blockDim.x;
      row = blockIdx.x;
      rowStride = gridDim.x;
    }
  }
  template <typename T>
  __device__ T sum(T v, T* sh) const {
    return WARP ? warp_reduce(v, SumOp()) : block_reduce(v, sh, SumOp(), (T)0);
  }
  // max skips NaN (MaxSkipNaN); identity is -Inf.
  template <typename T>
  __device__ T max(T v, T* sh) const {
    return WARP ? warp_reduce(v, MaxSkipNaN()) : block_reduce(v, sh, MaxSkipNaN(), (T)-INFINITY);
  }
};

__device__ __forceinline__ unsigned char* scratch_bytes() {
  __shared__ __align__(8) unsigned char raw[32 * 8];
  return raw;
}

// Shared scratch for block reductions: 32 slots of up to 8 bytes. Every
// caller shares the one array; block_reduce's leading __syncthreads makes
// back-to-back reductions (of any type) safe.
template <typename T>
__device__ __forceinline__ T* shared_scratch() {
  static_assert(sizeof(T) <= 8, "scratch slots are 8 bytes");
  return reinterpret_cast<T*>(scratch_bytes());
}

// exp at T's precision (expf is accurate to 2 ulp; no fast-math).
__device__ __forceinline__ float exp_t(float x) { return expf(x); }
__device__ __forceinline__ double exp_t(double x) { return exp(x); }

// row_max_sumexp reduces the first n elements of a row x over the group g:
// it sets *m to their maximum (skipping NaN; -Inf for none) and returns
// the sum of exp(x - m) in double, the shared first half of softmax,
// log-softmax and cross-entropy. Every thread of g gets both.
template <typename T, bool WARP>
__device__ __forceinline__ double row_max_sumexp(const RowGroup<WARP>& g, const T* x, i64 n, T* m) {
  T mx = (T)-INFINITY;
  for (i64 c = g.rank; c < n; c += g.size) mx = MaxSkipNaN()(mx, x[c]);
  mx = g.max(mx, shared_scratch<T>());
  double s = 0;
  for (i64 c = g.rank; c < n; c += g.size) s += (double)exp_t(x[c] - mx);
  *m = mx;
  return g.sum(s, shared_scratch<double>());
}
