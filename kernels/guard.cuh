// guard.cuh: the device side of a step that a CUDA graph can replay
// (tensor.StepGuard, tensor.AdamWArgs; cuda_guard.go). A graph replays its
// kernels with the arguments they were captured with, so what a training
// step decides from its data (the gradient clip factor; whether a loss or
// norm that is not finite cancels the update) and what changes from step
// to step (the learning rate and AdamW's bias corrections) live in memory
// the kernels read instead of in arguments. Both blocks are mapped pinned
// host memory: the host reads the loss and the norm after a step and
// writes the next step's constants without a copy.
//
// The fp16 gradient scaler's unscale reads its factor from the guard too
// and raises the guard's found flag, which skips the update as a
// non-finite norm does; the host reads the flag after the step and backs
// the scale off (amp.GradScaler.Record).
//
// The arithmetic is the host's, operation for operation: the norm is
// sqrt of the double sum of squares, the clip factor maxNorm / (norm +
// 1e-6) in double, rounded once to float32 and applied as x * factor with
// one rounding (tensor.ScaleAll); a factor of 1 or more leaves the
// gradients as they are (multiplying by exactly 1), as ClipGradNorm skips
// the scaling. So a guarded step gives the same bits as the host-driven
// one.
#pragma once
#include "common.cuh"

// StepGuard mirrors tensor's stepGuardWords. It starts with a Status so
// that the sum-of-squares kernels write their result into st.scalar.
struct StepGuard {
  Status st;
  double loss;  // the step's loss (float32, widened)
  double norm;  // the gradients' global L2 norm
  float coef;   // the clip factor applied (1: none)
  int skip;     // nonzero: overflow, or the loss or the norm is not finite; updates do nothing
  float inv;    // the fp16 gradient scaler's 1 / loss scale, written by the host
  int found;    // set by unscale_guarded_f32: a gradient was not finite (the host zeroes it)
};

// clip_guard (one thread) reads the sum of squares (0 when hasSum is 0:
// no gradients) and the loss, and writes the norm, the clip factor and
// the skip flag.
extern "C" __global__ void __launch_bounds__(32) clip_guard(StepGuard* g, const float* loss, double maxNorm, int hasSum) {
  if (threadIdx.x != 0 || blockIdx.x != 0) return;
  const double total = __dsqrt_rn(hasSum ? g->st.scalar : 0.0);
  const double l = loss != nullptr ? (double)loss[0] : 0.0;
  const double c = __ddiv_rn(maxNorm, __dadd_rn(total, 1e-6));
  g->norm = total;
  g->loss = l;
  g->coef = c < 1.0 ? __double2float_rn(c) : 1.0f;
  g->skip = g->found || !(isfinite(total) && isfinite(l));
}

// unscale_guarded_f32 is unscale_check_f32 (amp.cuh) with the factor read
// from g->inv and the flag written to g->found: the fp16 gradient scaler's
// unscale in a captured step. It tests the product, not the input: a
// non-finite input gives a non-finite product (inv is positive), and with
// a loss scale below 1 (inv above 1) a finite gradient can overflow, which
// amp.GradScaler.Unscale reports too (unscale_check_f32 tests the product
// the same way).
extern "C" __global__ void __launch_bounds__(256) unscale_guarded_f32(const i64* table, StepGuard* g) {
  const i64* e = table + 2 * (i64)blockIdx.y;
  float* p = (float*)e[0];
  const i64 n = e[1];
  const float inv = g->inv;
  int bad = 0;
  for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) {
    const float r = __fmul_rn(p[i], inv);
    bad |= !isfinite(r);
    p[i] = r;
  }
  if (bad) g->found = 1;
}

// scale_guarded_f32 multiplies every element of the tensors of table
// (address, count; blockIdx.y picks the tensor, as unscale_check_f32) by
// g->coef with one rounding.
extern "C" __global__ void __launch_bounds__(256) scale_guarded_f32(const i64* table, const StepGuard* g) {
  const i64* e = table + 2 * (i64)blockIdx.y;
  float* p = (float*)e[0];
  const i64 n = e[1];
  const float s = g->coef;
  if (s == 1.0f) return;  // x * 1 is x: ClipGradNorm does not scale either
  for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x)
    p[i] = __fmul_rn(p[i], s);
}
