// embedding.cuh: row gather (embedding lookup) and scatter-add (its
// backward). Ids are checked as they are read: an id outside [0, rows) is
// reported through the status block (see report in common.cuh) and its
// row is skipped (gather writes zeros there), so nothing is read or
// written out of bounds. The host raises the report at its next
// synchronization.
#pragma once
#include "common.cuh"

template <typename U>
__device__ __forceinline__ void gather(U* dst, const U* table, const int* ids, i64 nids, i64 dim, i64 rows,
                                       unsigned int* claim, Status* st) {
  FOR_N(i, nids * dim) {
    i64 r = i / dim, c = i - r * dim;
    int id = ids[r];
    if (id < 0 || id >= rows) {
      if (c == 0) report(claim, st, STATUS_GATHER_ID, r, id, rows);
      dst[i] = (U)0;
    } else {
      dst[i] = table[(i64)id * dim + c];
    }
  }
}

// scatter_add adds row i of dout into row ids[i] of dtable with atomicAdd:
// rows hit by several ids receive their contributions in no fixed order
// (float addition is then not bit-reproducible; the CPU's is).
template <typename T>
__device__ __forceinline__ void scatter_add(T* dtable, const T* dout, const int* ids, i64 nids, i64 dim, i64 rows,
                                            unsigned int* claim, Status* st) {
  FOR_N(i, nids * dim) {
    i64 r = i / dim, c = i - r * dim;
    int id = ids[r];
    if (id < 0 || id >= rows) {
      if (c == 0) report(claim, st, STATUS_SCATTER_ID, r, id, rows);
    } else {
      atomicAdd(dtable + (i64)id * dim + c, dout[i]);
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

#define SCATTER_KERNEL(sfx, T)                                                                              \
  extern "C" __global__ void __launch_bounds__(256) scatter_add_##sfx(T* dtable, const T* dout,             \
                                                                      const int* ids, i64 nids, i64 dim,    \
                                                                      i64 rows, unsigned int* claim,        \
                                                                      Status* st) {                         \
    scatter_add<T>(dtable, dout, ids, nids, dim, rows, claim, st);                                          \
  }
SCATTER_KERNEL(f32, float)
SCATTER_KERNEL(f64, double)
