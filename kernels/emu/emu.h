// emu.h: just enough of CUDA to run strata's kernels on the CPU, for
// checking them where there is no GPU (see run.sh). Each thread of a
// block is an OS thread; __syncthreads is a barrier of the block and
// __shfl_xor_sync an exchange through memory between two barriers of the
// warp; __shared__ arrays are static (blocks run one after another).
// Slow, and only as right as these stand-ins: it catches indexing,
// masking, synchronisation-order and arithmetic mistakes, not timing or
// hardware-specific ones.
#pragma once
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>
#include <vector_types.h>
#include <vector_functions.h>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))

struct EmuDim { unsigned int x, y, z; };
inline thread_local EmuDim threadIdx, blockIdx;
inline EmuDim blockDim, gridDim;

struct EmuBlock {
  std::barrier<>* block;
  std::vector<std::barrier<>*> warps;
  std::vector<float> fslot;  // 32 per warp
  std::vector<double> dslot;
  std::vector<unsigned char> gslot;  // emu_warp_gather: 64 bytes per thread
};
inline EmuBlock* emu_block;

inline void __syncthreads() { emu_block->block->arrive_and_wait(); }
inline void __threadfence_system() {}

template <typename T>
inline T emu_shfl_xor(T v, int o, std::vector<T>& slot) {
  const int tid = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z), w = tid >> 5, lane = tid & 31;
  slot[w * 32 + lane] = v;
  emu_block->warps[w]->arrive_and_wait();
  T r = slot[w * 32 + (lane ^ o)];
  emu_block->warps[w]->arrive_and_wait();
  return r;
}
// emu_warp_gather gives every lane of the warp all 32 lanes' values.
template <typename T, int N = 32>
inline void emu_warp_gather(const T& mine, T (&all)[N]) {
  static_assert(sizeof(T) <= 64, "64 bytes per lane");
  const int tid = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z), w = tid >> 5, lane = tid & 31;
  unsigned char* slot = emu_block->gslot.data() + (size_t)w * 32 * 64;
  std::memcpy(slot + lane * 64, &mine, sizeof(T));
  emu_block->warps[w]->arrive_and_wait();
  for (int l = 0; l < 32; l++) std::memcpy(&all[l], slot + l * 64, sizeof(T));
  emu_block->warps[w]->arrive_and_wait();
}
#define STRATA_EMU 1

// Bit casts of the device intrinsics (cast.cuh), on the host.
#include <cuda_fp16.h>
#include <cuda_bf16.h>
template <typename To, typename From>
inline To emu_bits(From v) {
  static_assert(sizeof(To) == sizeof(From));
  To o;
  std::memcpy(&o, &v, sizeof o);
  return o;
}
inline float __uint_as_float(unsigned int u) { return emu_bits<float>(u); }
inline unsigned int __float_as_uint(float f) { return emu_bits<unsigned int>(f); }
inline double __longlong_as_double(long long v) { return emu_bits<double>(v); }
inline long long __double_as_longlong(double v) { return emu_bits<long long>(v); }
inline __half __ushort_as_half(unsigned short b) { return emu_bits<__half>(b); }
inline unsigned short __half_as_ushort(__half h) { return emu_bits<unsigned short>(h); }
inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 h) { return emu_bits<unsigned short>(h); }
// Conversions rounding to nearest even: the host's default rounding mode.
inline float __double2float_rn(double v) { return (float)v; }
inline float __int2float_rn(int v) { return (float)v; }

inline float __shfl_xor_sync(unsigned, float v, int o) { return emu_shfl_xor(v, o, emu_block->fslot); }
inline double __shfl_xor_sync(unsigned, double v, int o) { return emu_shfl_xor(v, o, emu_block->dslot); }
inline long long __shfl_xor_sync(unsigned, long long v, int o) {
  return emu_bits<long long>(emu_shfl_xor(emu_bits<double>(v), o, emu_block->dslot));
}
inline unsigned int __umulhi(unsigned int a, unsigned int b) { return (unsigned int)(((uint64_t)a * b) >> 32); }
inline unsigned int atomicCAS(unsigned int* p, unsigned int cmp, unsigned int v) {
  unsigned int old = *p;
  if (old == cmp) *p = v;
  return old;
}
using std::max;
using std::min;
inline long long min(long long a, long long b) { return a < b ? a : b; }

// emu_launch3 runs fn on a grid x block launch of up to three dims, one
// block at a time; threads are numbered x fastest, as on the device, and
// a warp is 32 consecutive numbers.
inline void emu_launch3(EmuDim grid, EmuDim block, const std::function<void()>& fn) {
  const unsigned threads = block.x * block.y * block.z;
  blockDim = block;
  gridDim = grid;
  for (unsigned bz = 0; bz < grid.z; bz++)
    for (unsigned by = 0; by < grid.y; by++)
      for (unsigned bx = 0; bx < grid.x; bx++) {
        std::barrier<> bar(threads);
        EmuBlock blk{&bar, {}, std::vector<float>(threads), std::vector<double>(threads),
                     std::vector<unsigned char>((size_t)threads * 64)};
        std::vector<std::barrier<>*> ws;
        for (unsigned w = 0; w < (threads + 31) / 32; w++) ws.push_back(new std::barrier<>(std::min(32u, threads - 32 * w)));
        blk.warps = ws;
        emu_block = &blk;
        std::vector<std::thread> th;
        for (unsigned t = 0; t < threads; t++)
          th.emplace_back([&, t] {
            threadIdx = {t % block.x, t / block.x % block.y, t / (block.x * block.y)};
            blockIdx = {bx, by, bz};
            fn();
          });
        for (auto& x : th) x.join();
        for (auto* w : ws) delete w;
      }
}

// emu_launch runs fn on grid x block threads (1-D), one block at a time.
inline void emu_launch(unsigned grid, unsigned threads, const std::function<void()>& fn) {
  emu_launch3({grid, 1, 1}, {threads, 1, 1}, fn);
}
