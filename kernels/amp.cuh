// amp.cuh: the gradient scaler's fused unscale and inf/NaN check
// (tensor.UnscaleGrads, amp.GradScaler.Unscale): every gradient of the
// model in one launch. table holds, for tensor j, its device address
// (table[2j]) and element count (table[2j+1]); blockIdx.y picks the
// tensor and the x blocks stride over its elements. Each element is
// multiplied by inv with one rounding (as cpu_amp.go's v * s in float32),
// and any non-finite product sets *found, which the host zeroed: a
// non-finite element stays one (inv is finite and non-zero), and a finite
// one that overflows as it is multiplied (inv above 1, a loss scale below
// 1) is caught in the same pass.
#pragma once
#include "common.cuh"

extern "C" __global__ void __launch_bounds__(256) unscale_check_f32(const i64* table, float inv, int* found) {
  const i64* e = table + 2 * (i64)blockIdx.y;
  float* p = (float*)e[0];
  const i64 n = e[1];
  int bad = 0;
  for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) {
    const float r = __fmul_rn(p[i], inv);
    bad |= !isfinite(r);
    p[i] = r;
  }
  if (bad) *found = 1;
}
