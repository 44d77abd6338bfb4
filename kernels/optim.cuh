// optim.cuh: AdamW and SGD steps, PyTorch's rules exactly as
// cpukern/optim.go computes them, every operation an explicitly rounded
// intrinsic (no FMA contraction), so results match the CPU's to the bit
// on x86-64. The step-dependent constants (bias corrections) are computed
// once on the host.
//
// AdamW in float32 runs in float32, operation for operation as PyTorch's
// single-tensor float32 AdamW (and cpukern.adamW32): m by torch.lerp's
// two forms (lerpLow: weight below 0.5), v, then
// p = p*decay - stepSize*(m / (sqrt(v)/bc2Sqrt + eps)). AdamW in float64
// rounds where PyTorch stores a value and folds bc2Sqrt into stepSize and
// eps on the host (one division): p = p*decay - stepSize*m/(sqrt(v) + eps).
// SGD updates in double and rounds to T where PyTorch stores a value.
#pragma once
#include "common.cuh"
#include "cast.cuh"
#include "guard.cuh"

#define DADD __dadd_rn
#define DSUB __dsub_rn
#define DMUL __dmul_rn
#define DDIV __ddiv_rn
#define FADD __fadd_rn
#define FSUB __fsub_rn
#define FMUL __fmul_rn
#define FDIV __fdiv_rn

// adamw_one updates one element held in registers; adamw_elem, the
// single- and multi-tensor kernels and the vectorised path all run it, so
// all match the CPU to the bit.
__device__ __forceinline__ void adamw_one(float& p, float g, float& m, float& v, float decay, float w1, float beta2,
                                          float w2, float stepSize, float bc2Sqrt, float eps, int lerpLow) {
  const float mt = lerpLow ? FADD(m, FMUL(w1, FSUB(g, m))) : FSUB(g, FMUL(FSUB(g, m), FSUB(1.0f, w1)));
  const float vt = FADD(FMUL(beta2, v), FMUL(w2, FMUL(g, g)));
  const float denom = FADD(FDIV(__fsqrt_rn(vt), bc2Sqrt), eps);
  p = FSUB(FMUL(p, decay), FMUL(stepSize, FDIV(mt, denom)));
  m = mt;
  v = vt;
}

// The gradients of float32 parameters come in float32 or, kept in a half
// type (autograd's SetGradDType), as BF16 or F16 bits: grad_at and grad4
// read them widened, which is exact, so an update from half gradients is
// the float32 update of their values.
__device__ __forceinline__ float grad_at(const float* g, i64 i) { return g[i]; }
__device__ __forceinline__ float grad_at(const BF16* g, i64 i) { return widen(g[i]); }
__device__ __forceinline__ float grad_at(const F16* g, i64 i) { return widen(g[i]); }

// grad4 reads gradient elements [4j, 4j+4): a float4, or four half values
// in one 8-byte load (the first in the low bits).
__device__ __forceinline__ float4 grad4(const float* g, i64 j) { return ((const float4*)g)[j]; }
template <typename H>
__device__ __forceinline__ float4 grad4(const H* g, i64 j) {
  const uint2 u = ((const uint2*)g)[j];
  return make_float4(widen(H{(uint16_t)(u.x & 0xffffu)}), widen(H{(uint16_t)(u.x >> 16)}),
                     widen(H{(uint16_t)(u.y & 0xffffu)}), widen(H{(uint16_t)(u.y >> 16)}));
}

// adamw_elem updates element i.
template <typename G>
__device__ __forceinline__ void adamw_elem(float* p, const G* g, float* m, float* v, i64 i, float decay, float w1,
                                           float beta2, float w2, float stepSize, float bc2Sqrt, float eps,
                                           int lerpLow) {
  float pi = p[i], mi = m[i], vi = v[i];
  adamw_one(pi, grad_at(g, i), mi, vi, decay, w1, beta2, w2, stepSize, bc2Sqrt, eps, lerpLow);
  p[i] = pi;
  m[i] = mi;
  v[i] = vi;
}

// adamw_one4 updates the four elements of a float4 of each array.
__device__ __forceinline__ void adamw_one4(float4& p, const float4 g, float4& m, float4& v, float decay, float w1,
                                           float beta2, float w2, float stepSize, float bc2Sqrt, float eps,
                                           int lerpLow) {
  adamw_one(p.x, g.x, m.x, v.x, decay, w1, beta2, w2, stepSize, bc2Sqrt, eps, lerpLow);
  adamw_one(p.y, g.y, m.y, v.y, decay, w1, beta2, w2, stepSize, bc2Sqrt, eps, lerpLow);
  adamw_one(p.z, g.z, m.z, v.z, decay, w1, beta2, w2, stepSize, bc2Sqrt, eps, lerpLow);
  adamw_one(p.w, g.w, m.w, v.w, decay, w1, beta2, w2, stepSize, bc2Sqrt, eps, lerpLow);
}

// adamw_chunk4 updates elements [0, n) of 16-byte aligned float arrays
// (the gradient's 4 elements aligned) by float4, two a thread at a time,
// all loads first: offloaded moments (host memory the device reads over
// the bus) arrive in 512-byte warp requests with twice as many in flight
// as scalar loads give; then the tail element by element. Returns false
// (nothing done) when an array is not aligned so.
template <typename G>
__device__ __forceinline__ bool adamw_chunk4(float* __restrict__ p, const G* __restrict__ g, float* __restrict__ m,
                                             float* __restrict__ v, i64 n, float decay, float w1, float beta2,
                                             float w2, float stepSize, float bc2Sqrt, float eps, int lerpLow) {
  if ((((unsigned long long)p | (unsigned long long)m | (unsigned long long)v) & 15) != 0 ||
      ((unsigned long long)g & (4 * sizeof(G) - 1)) != 0)
    return false;
  float4* p4 = (float4*)p;
  float4 *m4 = (float4*)m, *v4 = (float4*)v;
  const i64 n4 = n >> 2, step = blockDim.x;
  i64 j = threadIdx.x;
  for (; j + step < n4; j += 2 * step) {
    float4 pa = p4[j], pb = p4[j + step], ma = m4[j], mb = m4[j + step], va = v4[j], vb = v4[j + step];
    const float4 ga = grad4(g, j), gb = grad4(g, j + step);
    adamw_one4(pa, ga, ma, va, decay, w1, beta2, w2, stepSize, bc2Sqrt, eps, lerpLow);
    adamw_one4(pb, gb, mb, vb, decay, w1, beta2, w2, stepSize, bc2Sqrt, eps, lerpLow);
    p4[j] = pa, p4[j + step] = pb, m4[j] = ma, m4[j + step] = mb, v4[j] = va, v4[j + step] = vb;
  }
  if (j < n4) {
    float4 pa = p4[j], ma = m4[j], va = v4[j];
    adamw_one4(pa, grad4(g, j), ma, va, decay, w1, beta2, w2, stepSize, bc2Sqrt, eps, lerpLow);
    p4[j] = pa, m4[j] = ma, v4[j] = va;
  }
  for (i64 i = (n4 << 2) + threadIdx.x; i < n; i += step)
    adamw_elem(p, g, m, v, i, decay, w1, beta2, w2, stepSize, bc2Sqrt, eps, lerpLow);
  return true;
}

__device__ __forceinline__ void adamw_step(float* p, const float* g, float* m, float* v, i64 n, float decay, float w1,
                                           float beta2, float w2, float stepSize, float bc2Sqrt, float eps,
                                           int lerpLow) {
  FOR_N(i, n) adamw_elem(p, g, m, v, i, decay, w1, beta2, w2, stepSize, bc2Sqrt, eps, lerpLow);
}

__device__ __forceinline__ void adamw_elem(double* p, const double* g, double* m, double* v, i64 i, double decay,
                                           double w1, double beta2, double w2, double stepSize, double bc2Sqrt,
                                           double eps, int lerpLow) {
  (void)bc2Sqrt;  // folded into stepSize and eps by the host
  (void)lerpLow;
  const double gi = g[i], mi = m[i];
  const double mt = DADD(mi, DMUL(w1, DSUB(gi, mi)));
  const double vt = DADD(DMUL(beta2, v[i]), DMUL(DMUL(w2, gi), gi));
  const double pi = DMUL(p[i], decay);
  p[i] = DSUB(pi, DDIV(DMUL(stepSize, mt), DADD(__dsqrt_rn(vt), eps)));
  m[i] = mt;
  v[i] = vt;
}

__device__ __forceinline__ void adamw_step(double* p, const double* g, double* m, double* v, i64 n, double decay,
                                           double w1, double beta2, double w2, double stepSize, double bc2Sqrt,
                                           double eps, int lerpLow) {
  FOR_N(i, n) adamw_elem(p, g, m, v, i, decay, w1, beta2, w2, stepSize, bc2Sqrt, eps, lerpLow);
}

template <typename T>
__device__ __forceinline__ void sgd(T* p, const T* g, T* buf, i64 n, double lr, double momentum, double wd,
                                    int nesterov) {
  FOR_N(i, n) {
    const double pi = (double)p[i];
    double d = DADD((double)g[i], DMUL(wd, pi));
    if (momentum != 0) {
      const T bt = (T)DADD(DMUL(momentum, (double)buf[i]), d);
      buf[i] = bt;
      d = nesterov ? DADD(d, DMUL(momentum, (double)bt)) : (double)bt;
    }
    p[i] = (T)DSUB(pi, DMUL(lr, d));
  }
}

// AdamWChunk is one run of a multi-tensor AdamW step: n elements of a
// parameter, its gradient and moments from the given addresses (the run's
// start), the parameter's decay factor 1 - lr * weight decay (rounded to T
// by the kernel, as the single-tensor launch rounds it), and the
// gradient's dtype: AdamWGradT (the parameter's), AdamWGradBF16 or
// AdamWGradF16 (float32 parameters only). One launch updates every
// parameter of a model (tensor.AdamWSteps).
struct AdamWChunk {
  void* p;
  const void* g;
  void* m;
  void* v;
  i64 n;
  double decay;
  int gdt;
  int pad;
};
enum { AdamWGradT = 0, AdamWGradBF16 = 1, AdamWGradF16 = 2 };

// adamw_run updates a run's n elements, vectorised where aligned.
template <typename G>
__device__ __forceinline__ void adamw_run(float* p, const G* g, float* m, float* v, i64 n, float decay, float w1,
                                          float beta2, float w2, float stepSize, float bc2Sqrt, float eps,
                                          int lerpLow) {
  if (adamw_chunk4(p, g, m, v, n, decay, w1, beta2, w2, stepSize, bc2Sqrt, eps, lerpLow)) return;
  for (i64 i = threadIdx.x; i < n; i += blockDim.x)
    adamw_elem(p, g, m, v, i, decay, w1, beta2, w2, stepSize, bc2Sqrt, eps, lerpLow);
}

// adamw_row updates the run of table row c, reading its gradient in the
// row's dtype.
__device__ __forceinline__ void adamw_row(const AdamWChunk& c, float decay, float w1, float beta2, float w2,
                                          float stepSize, float bc2Sqrt, float eps, int lerpLow) {
  float *p = (float*)c.p, *m = (float*)c.m, *v = (float*)c.v;
  switch (c.gdt) {
    case AdamWGradBF16:
      adamw_run(p, (const BF16*)c.g, m, v, c.n, decay, w1, beta2, w2, stepSize, bc2Sqrt, eps, lerpLow);
      break;
    case AdamWGradF16:
      adamw_run(p, (const F16*)c.g, m, v, c.n, decay, w1, beta2, w2, stepSize, bc2Sqrt, eps, lerpLow);
      break;
    default:
      adamw_run(p, (const float*)c.g, m, v, c.n, decay, w1, beta2, w2, stepSize, bc2Sqrt, eps, lerpLow);
  }
}

// float64 parameters have float64 gradients (the host refuses others).
__device__ __forceinline__ void adamw_row(const AdamWChunk& c, double decay, double w1, double beta2, double w2,
                                          double stepSize, double bc2Sqrt, double eps, int lerpLow) {
  double *p = (double*)c.p, *m = (double*)c.m, *v = (double*)c.v;
  const double* g = (const double*)c.g;
  for (i64 i = threadIdx.x; i < c.n; i += blockDim.x)
    adamw_elem(p, g, m, v, i, decay, w1, beta2, w2, stepSize, bc2Sqrt, eps, lerpLow);
}

// adamw_multi updates rows blockIdx.x, + gridDim.x, ... of the table's
// nrows: a grid of nrows blocks is one row a block (the device's own
// update, at the speed of its memory); a smaller grid (the side stream's
// update of moments in host memory, bound by the bus) keeps that many
// blocks resident from start to end, so that the bus stays busy while the
// forward pass's kernels take the other SMs, where a block a row would
// wait for an SM at every row.
template <typename T>
__device__ void adamw_multi(const AdamWChunk* chunks, int nrows, T w1, T beta2, T w2, T stepSize, T bc2Sqrt, T eps,
                            int lerpLow) {
  for (int r = blockIdx.x; r < nrows; r += gridDim.x) {
    const AdamWChunk c = chunks[r];
    adamw_row(c, (T)c.decay, w1, beta2, w2, stepSize, bc2Sqrt, eps, lerpLow);
  }
}

// AdamWArgs mirrors tensor's adamwArgsWords: a step's learning rate and
// constants (adamwConstants on the host, unfolded), written by the host
// before the step, for adamw_multi_guarded. AdamWChunk.decay holds the
// weight decay there; the kernel forms 1 - lr * weight decay in double as
// the host does.
struct AdamWArgs {
  double lr, w1, beta2, w2, stepSize, bc2Sqrt, eps;
  int lerpLow;
  int pad;
};

// adamw_multi_guarded is adamw_multi with its constants read from a and
// nothing done when g->skip is set (a captured step whose loss or norm is
// not finite: guard.cuh). float64 folds bc2Sqrt into stepSize and eps as
// the host does for adamw_multi.
template <typename T>
__device__ void adamw_multi_guarded(const AdamWChunk* chunks, const AdamWArgs* a, const StepGuard* g) {
  if (g != nullptr && g->skip) return;
  const AdamWChunk c = chunks[blockIdx.x];
  double stepSize = a->stepSize, eps = a->eps;
  if (sizeof(T) == 8) stepSize = DMUL(stepSize, a->bc2Sqrt), eps = DMUL(eps, a->bc2Sqrt);
  const T decay = (T)DSUB(1.0, DMUL(a->lr, c.decay));
  const T w1 = (T)a->w1, beta2 = (T)a->beta2, w2 = (T)a->w2, ss = (T)stepSize, bc = (T)a->bc2Sqrt, e = (T)eps;
  adamw_row(c, decay, w1, beta2, w2, ss, bc, e, a->lerpLow);
}

#define OPTIM_KERNELS(sfx, T)                                                                            \
  extern "C" __global__ void __launch_bounds__(256) adamw_##sfx(T* p, const T* g, T* m, T* v, i64 n, T decay,  \
                                                                  T w1, T beta2, T w2, T stepSize, T bc2Sqrt, \
                                                                  T eps, int lerpLow) {                       \
    adamw_step(p, g, m, v, n, decay, w1, beta2, w2, stepSize, bc2Sqrt, eps, lerpLow);                        \
  }                                                                                                          \
  extern "C" __global__ void __launch_bounds__(256) adamw_multi_##sfx(const AdamWChunk* chunks, int nrows, T w1,  \
                                                                        T beta2, T w2, T stepSize, T bc2Sqrt,    \
                                                                        T eps, int lerpLow) {                    \
    adamw_multi<T>(chunks, nrows, w1, beta2, w2, stepSize, bc2Sqrt, eps, lerpLow);                             \
  }                                                                                                          \
  extern "C" __global__ void __launch_bounds__(256)                                                      \
      adamw_multi_guarded_##sfx(const AdamWChunk* chunks, const AdamWArgs* a, const StepGuard* g) {      \
    adamw_multi_guarded<T>(chunks, a, g);                                                                \
  }                                                                                                      \
  extern "C" __global__ void __launch_bounds__(256)                                                      \
      sgd_##sfx(T* p, const T* g, T* buf, i64 n, double lr, double momentum, double wd, int nesterov) {  \
    sgd<T>(p, g, buf, n, lr, momentum, wd, nesterov);                                                    \
  }
OPTIM_KERNELS(f32, float)
OPTIM_KERNELS(f64, double)
