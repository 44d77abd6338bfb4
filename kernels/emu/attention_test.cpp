// attention_test.cpp: runs kernels/attention.cuh on the CPU (emu.h) and
// checks the forward and both backward kernels against a float64
// reference: naive causal softmax attention whose dropout mask comes from
// dropout.cuh's own kernel applied to the whole (bh, t, t) matrix, so the
// fused kernels' index arithmetic is checked against the plain path's.
// Every dtype, every head size (and padded ones), t not a multiple of any
// tile, with and without dropout; the tensor-core kernels of
// attention_mma3.cuh (mma.sync, ldmatrix and cp.async emulated from the
// PTX layouts and semantics, attention_tc.cuh) within a few roundoffs of
// the half type. See run.sh.
#include "emu.h"
#include <cstdio>
#include <random>
#include <string>
#include "../attention.cuh"

template <typename T> T from_f(float x);
template <> float from_f<float>(float x) { return x; }
template <> __half from_f<__half>(float x) { return __float2half(x); }
template <> __nv_bfloat16 from_f<__nv_bfloat16>(float x) { return __float2bfloat16(x); }
template <> f32x3 from_f<f32x3>(float x) { return f32x3{x}; }

struct Launch {
  void (*fwd)(float*, float*, const void*, const void*, const void*, i64, i64, int, float, u64, u64, u64, float);
};

static int failures = 0;

static double check(const char* what, const std::vector<float>& got, const std::vector<double>& want, double tol) {
  double num = 0, den = 0;
  size_t worst = 0;
  for (size_t i = 0; i < want.size(); i++) {
    double e = std::fabs((double)got[i] - want[i]);
    if (!(e <= num)) num = e, worst = i;  // NaN counts as worst
    den = std::max(den, std::fabs(want[i]));
  }
  double rel = num / std::max(den, 1.0);
  if (!(rel <= tol)) {
    std::printf("    FAIL %s: max err %.3g (rel %.3g) at %zu: got %.9g want %.9g\n", what, num, rel, worst, got[worst], want[worst]);
    failures++;
  }
  return rel;
}

// Launch shapes: rows of a block for each kernel, threads, and the
// tolerances relative to the largest element (float32 math: 1e-5; the
// tensor-core kernels round p, dout and ds to the input type: a few u).
struct Shape {
  int fwdRows, dqRows, dkvRows, threads;
  double tolOut, tolGrad;
  int dqThreads = 0, dkvThreads = 0;  // 0: threads
  // lse: 1e-5 where the kernels multiply the inputs as they are; the
  // TF32 kernels round float32 q and k to 10 mantissa bits first.
  double tolLse = 1e-5;
};

// The tensor-core kernels (TC) pass dout rounded to T from backward_dq
// to backward_dkdv through doh. With nh > 0 they run on the layout of a
// (B, T, 3C) product: q, k, v (and dq, dk, dv) interleaved a token at a
// time, nh heads each, out and dout (B, T, nh * hd); the operands are
// scattered into it and the results gathered back for the checks.
template <typename T, int HD, bool TC = false, typename F, typename DQ, typename DKV>
void run_case(const char* dt, Shape sh, F fwd, DQ bdq, DKV bdkv, int bh, int t, int hd, double p, int nh = 0) {
  const u64 seed = 0x5eed, offset = 12345;
  const float scale = 1.f / std::sqrt((float)hd);
  const u64 thr = p > 0 ? (u64)std::ceil(p * 0x1p32) : 0;
  const float dscale = p > 0 ? (float)(1 / (1 - p)) : 1.f;
  std::mt19937 rng(t * 131 + hd);
  std::normal_distribution<float> nd;
  const size_t n = (size_t)bh * t * hd;
  std::vector<T> q(n), k(n), v(n);
  std::vector<double> qd(n), kd(n), vd(n), dod(n);
  std::vector<float> dout(n);
  for (size_t i = 0; i < n; i++) {
    q[i] = from_f<T>(nd(rng)), k[i] = from_f<T>(nd(rng)), v[i] = from_f<T>(nd(rng));
    qd[i] = attn_ld(q[i]), kd[i] = attn_ld(k[i]), vd[i] = attn_ld(v[i]);
    dout[i] = nd(rng), dod[i] = dout[i];
  }
  // The mask of the plain path: dropout.cuh's kernel over (bh, t, t) ones.
  const size_t nn = (size_t)bh * t * t;
  std::vector<float> ones(nn, 1.f), mask(nn, 1.f);
  if (p > 0) {
    const i64 groups = (i64)(((offset & 3) + nn + 3) >> 2);
    emu_launch((unsigned)((groups + 255) / 256), 256, [&] { dropout_f32(mask.data(), ones.data(), (i64)nn, seed, offset, thr, dscale); });
  }
  // Reference in float64.
  std::vector<double> out(n, 0), lse(bh * t), dq(n, 0), dk(n, 0), dv(n, 0);
  std::vector<double> P(t), dP(t);
  for (int h = 0; h < bh; h++)
    for (int i = 0; i < t; i++) {
      auto row = [&](std::vector<double>& x, int r) { return &x[((size_t)h * t + r) * hd]; };
      double mx = -INFINITY;
      for (int j = 0; j <= i; j++) {
        double s = 0;
        for (int d = 0; d < hd; d++) s += row(qd, i)[d] * row(kd, j)[d];
        P[j] = s * scale;
        mx = std::max(mx, P[j]);
      }
      double sum = 0;
      for (int j = 0; j <= i; j++) sum += (P[j] = std::exp(P[j] - mx));
      for (int j = 0; j <= i; j++) P[j] /= sum;
      lse[h * t + i] = mx + std::log(sum);
      const float* m = &mask[((size_t)h * t + i) * t];
      for (int j = 0; j <= i; j++)
        for (int d = 0; d < hd; d++) row(out, i)[d] += P[j] * m[j] * row(vd, j)[d];
      double delta = 0;
      for (int j = 0; j <= i; j++) {
        double g = 0;
        for (int d = 0; d < hd; d++) g += row(dod, i)[d] * row(vd, j)[d];
        dP[j] = g * m[j];
        delta += dP[j] * P[j];
      }
      for (int j = 0; j <= i; j++) {
        const double ds = P[j] * (dP[j] - delta);
        for (int d = 0; d < hd; d++) {
          row(dq, i)[d] += scale * ds * row(kd, j)[d];
          row(dk, j)[d] += scale * ds * row(qd, i)[d];
          row(dv, j)[d] += P[j] * m[j] * row(dod, i)[d];
        }
      }
    }
  std::vector<float> gout(n, NAN), glse(bh * t, NAN), gdq(n, NAN), gdk(n, NAN), gdv(n, NAN), delta(bh * t, NAN);
  const int BR = sh.fwdRows, DR = sh.dqRows, KB = sh.dkvRows;
  std::vector<T> doh(n, from_f<T>(NAN));
  if constexpr (TC) {
    // Layouts: contiguous (nh 1, rows hd apart), or a (B, T, 3C) product.
    const int knh = nh > 0 ? nh : 1, rsi = nh > 0 ? 3 * nh * hd : hd, rso = nh > 0 ? nh * hd : hd;
    const size_t gi = nh > 0 ? (size_t)nh * hd : n, go = n;  // offset of k (and v) after q; size of out
    auto at = [&](int h, int r, int d, int rs) { return (size_t)(h / knh) * t * rs + (size_t)(h % knh) * hd + (size_t)r * rs + d; };
    std::vector<T> qkv(nh > 0 ? 3 * n : 3 * n, from_f<T>(NAN));
    std::vector<float> sout(go, NAN), sdout(go, NAN), sdq(3 * n, NAN);
    for (int h = 0; h < bh; h++)
      for (int r = 0; r < t; r++)
        for (int d = 0; d < hd; d++) {
          const size_t c = ((size_t)h * t + r) * hd + d, i = at(h, r, d, rsi);
          qkv[i] = q[c], qkv[i + gi] = k[c], qkv[i + 2 * gi] = v[c];
          sdout[at(h, r, d, rso)] = dout[c];
        }
    emu_launch(bh * ((t + BR - 1) / BR), sh.threads, [&] {
      fwd(sout.data(), glse.data(), qkv.data(), qkv.data() + gi, qkv.data() + 2 * gi, bh, t, hd, knh, rsi, rso, scale, seed, offset, thr, dscale);
    });
    emu_launch(bh * ((t + DR - 1) / DR), sh.dqThreads ? sh.dqThreads : sh.threads, [&] {
      bdq(sdq.data(), delta.data(), doh.data(), qkv.data(), qkv.data() + gi, qkv.data() + 2 * gi, sout.data(), sdout.data(), glse.data(), bh, t, hd, knh, rsi, rso, scale, seed, offset, thr, dscale);
    });
    emu_launch(bh * ((t + KB - 1) / KB), sh.dkvThreads ? sh.dkvThreads : sh.threads, [&] {
      bdkv(sdq.data() + gi, sdq.data() + 2 * gi, qkv.data(), qkv.data() + gi, qkv.data() + 2 * gi, doh.data(), glse.data(), delta.data(), bh, t, hd, knh, rsi, scale, seed, offset, thr, dscale);
    });
    size_t written = 0;  // elements of the strided outputs the kernels wrote (the rest must stay NaN)
    for (int h = 0; h < bh; h++)
      for (int r = 0; r < t; r++)
        for (int d = 0; d < hd; d++) {
          const size_t c = ((size_t)h * t + r) * hd + d, i = at(h, r, d, rsi);
          gout[c] = sout[at(h, r, d, rso)];
          gdq[c] = sdq[i], gdk[c] = sdq[i + gi], gdv[c] = sdq[i + 2 * gi];
          written += 4;
        }
    size_t touched = 0;
    for (float x : sout) touched += !std::isnan(x);
    for (float x : sdq) touched += !std::isnan(x);
    if (touched != written) {
      std::printf("    FAIL: the kernels wrote %zu elements, want %zu\n", touched, written);
      failures++;
    }
  } else {
    emu_launch(bh * ((t + BR - 1) / BR), sh.threads, [&] {
      fwd(gout.data(), glse.data(), q.data(), k.data(), v.data(), bh, t, hd, scale, seed, offset, thr, dscale);
    });
    emu_launch(bh * ((t + DR - 1) / DR), sh.dqThreads ? sh.dqThreads : sh.threads, [&] {
      bdq(gdq.data(), delta.data(), q.data(), k.data(), v.data(), gout.data(), dout.data(), glse.data(), bh, t, hd, scale, seed, offset, thr, dscale);
    });
    emu_launch(bh * ((t + KB - 1) / KB), sh.dkvThreads ? sh.dkvThreads : sh.threads, [&] {
      bdkv(gdk.data(), gdv.data(), q.data(), k.data(), v.data(), dout.data(), glse.data(), delta.data(), bh, t, hd, scale, seed, offset, thr, dscale);
    });
  }
  std::printf("%s hd %3d (HD %3d) t %3d p %.1f nh %d:", dt, hd, HD, t, p, nh);
  std::printf(" out %.2g", check("out", gout, out, sh.tolOut));
  std::printf(" lse %.2g", check("lse", glse, lse, sh.tolLse));
  std::printf(" dq %.2g", check("dq", gdq, dq, sh.tolGrad));
  std::printf(" dk %.2g", check("dk", gdk, dk, sh.tolGrad));
  std::printf(" dv %.2g\n", check("dv", gdv, dv, sh.tolGrad));
}

#define CASE(sfx, T, HD, bh, t, hd, p)                                                                     \
  run_case<T, HD>(#sfx, Shape{AttnFwdCfg<HD>::BR, AttnDqCfg<HD>::BR, AttnDkvCfg<HD>::KB, ATTN_THREADS, 1e-5, 2e-5}, \
                  attention_forward_##sfx##_h##HD, attention_backward_dq_##sfx##_h##HD,                         \
                  attention_backward_dkdv_##sfx##_h##HD, bh, t, hd, p)

// The tensor-core kernels, u the unit roundoff of the input type: without
// dropout (p == 0) the mma3 ones, with it the mma3drop ones, as the
// launcher picks them; each at its own shapes.
#define MMA3_SHAPE(T, HD, D, u)                                                                          \
  Shape{16 * Attn3Fwd<HD, D, Attn3K<T>::k>::W, 16 * Attn3Dq<HD, D, Attn3K<T>::k>::W,                 \
        16 * Attn3Dkv<HD, D, Attn3K<T>::k>::W, 32 * Attn3Fwd<HD, D, Attn3K<T>::k>::W, 8 * (u), 16 * (u), \
        32 * Attn3Dq<HD, D, Attn3K<T>::k>::W, 32 * Attn3Dkv<HD, D, Attn3K<T>::k>::W,                     \
        sizeof(T) == 4 ? (u) : 1e-5}
#define MMA3_RUN(name, D, sfx, T, u, HD, bh, t, hd, p, nh)                                                 \
  run_case<T, HD, true>(#sfx "-" #name, MMA3_SHAPE(T, HD, D, u), attention_forward_##name##_##sfx##_h##HD,   \
                        attention_backward_dq_##name##_##sfx##_h##HD,                                     \
                        attention_backward_dkdv_##name##_##sfx##_h##HD, bh, t, hd, p, nh)
#define MMA3_CASE(sfx, T, u, HD, bh, t, hd, p, nh)               \
  do {                                                           \
    if ((p) > 0)                                                 \
      MMA3_RUN(mma3drop, true, sfx, T, u, HD, bh, t, hd, p, nh); \
    else                                                         \
      MMA3_RUN(mma3, false, sfx, T, u, HD, bh, t, hd, p, nh);    \
  } while (0)

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::string(argv[1]) == "quick";
  const bool mma = argc > 1 && std::string(argv[1]) == "mma";
  const bool mma3 = argc > 1 && std::string(argv[1]) == "mma3";  // the same as mma
  const double uh0 = 0x1p-11, ub0 = 0x1p-8, ut0 = 0x1p-11;  // TF32 has float16's 10 mantissa bits
  const double u3 = 1.25e-6;
  const bool x3 = argc > 1 && std::string(argv[1]) == "x3";  // only the three-product kernels
  const bool tf32 = x3 || (argc > 1 && std::string(argv[1]) == "tf32");  // only the TF32 kernels
  // t: one row, fewer than a tile, not a multiple of any tile, several
  // blocks of every kernel (128-row blocks included); hd: each HD, and
  // padded (24, 100).
  for (int t : {1, 37, 70, 130, 200, 300}) {
    for (double p : {0.0, 0.2}) {
      if (quick) break;
      // Float32 inputs on TF32 tensor cores (HD 16 to 64): contiguous,
      // padded, and the heads of a (B, T, 3C) product in place.
      if (!x3) {
      MMA3_CASE(tf32, float, ut0, 64, 2, t, 64, p, 0);
      MMA3_CASE(tf32, float, ut0, 32, 2, t, 24, p, 0);
      MMA3_CASE(tf32, float, ut0, 16, 2, t, 16, p, 0);
      MMA3_CASE(tf32, float, ut0, 64, 6, t, 64, p, 3);
      MMA3_CASE(tf32, float, ut0, 64, 2, t, 40, p, 2);
      }
      // Float32 in three TF32 products: float32's tolerances (u3: 8 u3
      // is the float32-math kernels' 1e-5).
      MMA3_CASE(tf32x3, f32x3, u3, 64, 2, t, 64, p, 0);
      MMA3_CASE(tf32x3, f32x3, u3, 32, 2, t, 24, p, 0);
      MMA3_CASE(tf32x3, f32x3, u3, 64, 6, t, 64, p, 3);
      MMA3_CASE(tf32x3, f32x3, u3, 16, 2, t, 16, p, 1);
      if (tf32) continue;
      MMA3_CASE(f16, __half, uh0, 64, 2, t, 64, p, 0);
      MMA3_CASE(bf16, __nv_bfloat16, ub0, 64, 3, t, 64, p, 0);
      MMA3_CASE(bf16, __nv_bfloat16, ub0, 64, 1, t, 40, p, 0);
      MMA3_CASE(f16, __half, uh0, 128, 2, t, 100, p, 0);
      MMA3_CASE(bf16, __nv_bfloat16, ub0, 128, 1, t, 128, p, 0);
      MMA3_CASE(f16, __half, uh0, 16, 2, t, 16, p, 0);
      MMA3_CASE(bf16, __nv_bfloat16, ub0, 32, 2, t, 24, p, 0);
      MMA3_CASE(f16, __half, uh0, 32, 1, t, 32, p, 0);
      // The heads of a (B, T, 3C) product in place: 2 batches of 3 heads
      // (the aligned, cp.async path), and a padded head size (element by
      // element).
      MMA3_CASE(bf16, __nv_bfloat16, ub0, 64, 6, t, 64, p, 3);
      MMA3_CASE(f16, __half, uh0, 32, 4, t, 32, p, 2);
      MMA3_CASE(f16, __half, uh0, 128, 2, t, 128, p, 1);
      MMA3_CASE(bf16, __nv_bfloat16, ub0, 32, 4, t, 24, p, 2);
    }
    if (quick) break;
    // The dropout variants without dropout (thr 0) stay right too.
    if (!x3) MMA3_RUN(mma3drop, true, tf32, float, ut0, 64, 1, t, 64, 0.0, 0);
    if (tf32) continue;
    MMA3_RUN(mma3drop, true, bf16, __nv_bfloat16, ub0, 64, 1, t, 64, 0.0, 0);
  }
  for (int t : {1, 37, 70}) {
    if (mma || mma3 || tf32) break;
    for (double p : {0.0, 0.2}) {
      CASE(f32, float, 16, 3, t, 16, p);
      if (quick) continue;
      CASE(f32, float, 32, 3, t, 24, p);
      CASE(f32, float, 32, 3, t, 32, p);
      CASE(f32, float, 64, 3, t, 64, p);
      CASE(f32, float, 128, 3, t, 100, p);
      CASE(f32, float, 128, 3, t, 128, p);
      CASE(f16, __half, 64, 3, t, 64, p);
      CASE(f16, __half, 128, 2, t, 128, p);
      CASE(bf16, __nv_bfloat16, 64, 3, t, 64, p);
      CASE(bf16, __nv_bfloat16, 32, 2, t, 32, p);
    }
  }
  std::printf(failures ? "%d FAILED\n" : "all passed\n", failures);
  return failures ? 1 : 0;
}
