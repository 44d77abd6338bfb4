// embedding.cuh: row gather (embedding lookup) and scatter-add (its
// backward, deterministic: see below). Ids are checked as they are read: an id outside [0, rows) is
// reported through the status block (see report in common.cuh) and its
// row is skipped (gather writes zeros there), so nothing is read or
// written out of bounds. The host raises the report at its next
// synchronization.
#pragma once
#include "common.cuh"

// gather copies row ids[r] of table into row r of dst, a block a row (the
// grid strides over rows): the id is read once a row and no thread divides
// (an element a thread with a 64-bit division each took 0.3 ms for GPT-2's
// 8192 x 768 lookup on the H200).
template <typename U>
__device__ __forceinline__ void gather(U* dst, const U* table, const int* ids, i64 nids, i64 dim, i64 rows,
                                       unsigned int* claim, Status* st) {
  for (i64 r = blockIdx.x; r < nids; r += gridDim.x) {
    const int id = ids[r];
    U* out = dst + r * dim;
    if (id < 0 || id >= rows) {
      if (threadIdx.x == 0) report(claim, st, STATUS_GATHER_ID, r, id, rows);
      for (i64 c = threadIdx.x; c < dim; c += blockDim.x) out[c] = (U)0;
      continue;
    }
    const U* src = table + (i64)id * dim;
    for (i64 c = threadIdx.x; c < dim; c += blockDim.x) out[c] = src[c];
  }
}

// The scatter-add (embedding backward) is deterministic: it sums the rows
// of dout that hit one row of dtable in ascending position order, the
// order of the CPU's loop, so the result is bit for bit the CPU's and the
// same on every run (float atomics would add in whatever order the threads
// arrive). Three steps, no float atomics:
//   1. scatter_keys: one 64-bit key per position, (id << 32) | position,
//      checking the id; bad ids and the padding up to a power of two get
//      the key ~0, which sorts last and is skipped.
//   2. a bitonic sort of the keys (sort_keys_tile in shared memory for
//      strides within a tile of SORT_TILE keys, sort_keys_step in global
//      memory for longer ones): keys are unique, so the order is total.
//   3. scatter_runs: a block per run of equal ids (the block at the run's
//      first key) adds the run's rows of dout, in order, into its row.
__device__ __forceinline__ void make_scatter_keys(u64* keys, const int* ids, i64 nids, i64 npad, i64 rows,
                                             unsigned int* claim, Status* st) {
  FOR_N(i, npad) {
    u64 key = ~0ull;
    if (i < nids) {
      int id = ids[i];
      if (id < 0 || id >= rows) {
        report(claim, st, STATUS_SCATTER_ID, i, id, rows);
      } else {
        key = ((u64)(unsigned int)id << 32) | (u64)i;
      }
    }
    keys[i] = key;
  }
}

#define SORT_TILE 2048

// bitonic_tile (kernel sort_keys_tile) runs bitonic steps on tiles of SORT_TILE keys (or all n
// keys when fewer) in shared memory. With kmin 0 it sorts each tile (every
// k up to the tile); with kmin = k > SORT_TILE it finishes step k's merge
// for the strides inside a tile. The direction of a pair comes from its
// global index, as in the steps over global memory.
__device__ __forceinline__ void bitonic_tile(u64* keys, i64 n, i64 kmin) {
  __shared__ u64 s[SORT_TILE];
  const i64 tile = n < SORT_TILE ? n : SORT_TILE;
  for (i64 base = (i64)blockIdx.x * tile; base < n; base += (i64)gridDim.x * tile) {
    for (i64 t = threadIdx.x; t < tile; t += blockDim.x) s[t] = keys[base + t];
    __syncthreads();
    const i64 k0 = kmin ? kmin : 2, k1 = kmin ? kmin : tile;
    for (i64 k = k0; k <= k1; k <<= 1) {
      for (i64 j = kmin ? tile / 2 : k / 2; j > 0; j >>= 1) {
        for (i64 t = threadIdx.x; t < tile; t += blockDim.x) {
          i64 l = t ^ j;
          if (l > t) {
            bool up = ((base + t) & k) == 0;
            u64 a = s[t], b = s[l];
            if ((a > b) == up) {
              s[t] = b;
              s[l] = a;
            }
          }
        }
        __syncthreads();
      }
    }
    for (i64 t = threadIdx.x; t < tile; t += blockDim.x) keys[base + t] = s[t];
    __syncthreads();
  }
}

// bitonic_step (kernel sort_keys_step) is one bitonic compare-exchange step (k, j) over all n
// keys in global memory.
__device__ __forceinline__ void bitonic_step(u64* keys, i64 n, i64 k, i64 j) {
  FOR_N(i, n) {
    i64 l = i ^ j;
    if (l > i) {
      bool up = (i & k) == 0;
      u64 a = keys[i], b = keys[l];
      if ((a > b) == up) {
        keys[i] = b;
        keys[l] = a;
      }
    }
  }
}

// scatter_runs adds, for each run of equal ids in the sorted keys, the
// rows of dout at the run's positions, in order, to the id's row of
// dtable. Blocks stride over key indices; only a run's first key does
// work, its threads over the columns.
template <typename T>
__device__ __forceinline__ void scatter_runs(T* dtable, const T* dout, const u64* keys, i64 n, i64 dim) {
  for (i64 i = blockIdx.x; i < n; i += gridDim.x) {
    const u64 key = keys[i];
    if (key == ~0ull) return;  // the rest is padding and bad ids
    const unsigned int id = (unsigned int)(key >> 32);
    if (i > 0 && (unsigned int)(keys[i - 1] >> 32) == id) continue;
    i64 end = i + 1;
    while (end < n && (unsigned int)(keys[end] >> 32) == id) end++;
    T* row = dtable + (i64)id * dim;
    for (i64 c = threadIdx.x; c < dim; c += blockDim.x) {
      T acc = row[c];
      for (i64 j = i; j < end; j++) acc += dout[(i64)(unsigned int)keys[j] * dim + c];
      row[c] = acc;
    }
  }
}

#define GATHER_KERNEL(b, U)                                                                                 \
  extern "C" __global__ void __launch_bounds__(256) gather_##b(U* dst, const U* table, const int* ids,      \
                                                               i64 nids, i64 dim, i64 rows,                 \
                                                               unsigned int* claim, Status* st) {           \
    gather<U>(dst, table, ids, nids, dim, rows, claim, st);                                                 \
  }
GATHER_KERNEL(b2, uint16_t)
GATHER_KERNEL(b4, uint32_t)
GATHER_KERNEL(b8, u64)

extern "C" __global__ void __launch_bounds__(256) scatter_keys(u64* keys, const int* ids, i64 nids, i64 npad,
                                                             i64 rows, unsigned int* claim, Status* st) {
  make_scatter_keys(keys, ids, nids, npad, rows, claim, st);
}
extern "C" __global__ void __launch_bounds__(1024) sort_keys_tile(u64* keys, i64 n, i64 kmin) {
  bitonic_tile(keys, n, kmin);
}
extern "C" __global__ void __launch_bounds__(256) sort_keys_step(u64* keys, i64 n, i64 k, i64 j) {
  bitonic_step(keys, n, k, j);
}

#define SCATTER_KERNEL(sfx, T)                                                                              \
  extern "C" __global__ void __launch_bounds__(256) scatter_runs_##sfx(T* dtable, const T* dout,            \
                                                                       const u64* keys, i64 n, i64 dim) {   \
    scatter_runs<T>(dtable, dout, keys, n, dim);                                                            \
  }
SCATTER_KERNEL(f32, float)
SCATTER_KERNEL(f64, double)
