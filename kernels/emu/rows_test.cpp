// rows_test.cpp: runs the row kernels of layernorm.cuh (forward, and the
// backward with its dw/db partials, on the register path and the general
// one) and the fused cross-entropy of crossentropy.cuh on the CPU (emu.h),
// against float64 references: widths on and off the register path, rows
// that do not fill a block, rows far from zero against their spread,
// absent weight and bias, half outputs, and rows with -Inf, +Inf and NaN
// logits. See run.sh (`run.sh rows`).
#include "emu.h"
#include <cstdio>
#include <random>
#include <string>
#include "../layernorm.cuh"
#include "../crossentropy.cuh"

static int failures = 0;

// check compares got with want: max |err| / max(max |want|, 1) <= tol.
static void check(const std::string& what, const std::vector<double>& got, const std::vector<double>& want, double tol) {
  double num = 0, den = 0;
  size_t worst = 0;
  for (size_t i = 0; i < want.size(); i++) {
    double e = std::fabs(got[i] - want[i]);
    if (!(e <= num)) num = e, worst = i;
    den = std::max(den, std::fabs(want[i]));
  }
  double rel = num / std::max(den, 1.0);
  if (!(rel <= tol)) {
    std::printf("    FAIL %s: rel err %.3g at %zu: got %.9g want %.9g\n", what.c_str(), rel, worst, got[worst], want[worst]);
    failures++;
  }
}

static float widen_any(float v) { return v; }
static float widen_any(BF16 v) { return widen(v); }
static float widen_any(F16 v) { return widen(v); }

template <typename T>
static std::vector<double> wide(const std::vector<T>& v) {
  std::vector<double> o(v.size());
  for (size_t i = 0; i < v.size(); i++) o[i] = (double)widen_any(v[i]);
  return o;
}

static std::mt19937_64 rng(7);
static std::vector<float> randn(size_t n, float scale) {
  std::normal_distribution<float> d(0, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// layer norm forward: the register path for float32 and bfloat16 y.
template <typename Y>
static void ln_forward(int rows, int cols, bool affine, const char* yname, float shift = 3, float scale = 2) {
  auto x = randn((size_t)rows * cols, scale), w = randn(cols, 1), b = randn(cols, 1);
  for (auto& v : x) v += shift;  // a mean far from zero
  std::vector<Y> y((size_t)rows * cols);
  std::vector<float> mean(rows), rstd(rows);
  const float *wp = affine ? w.data() : nullptr, *bp = affine ? b.data() : nullptr;
  emu_launch((unsigned)((rows + 7) / 8), 256, [&] {
    layernorm_any<float, Y>(y.data(), mean.data(), rstd.data(), x.data(), wp, bp, rows, cols, 1e-5);
  });
  std::vector<double> wy(y.size()), wm(rows), wr(rows), gm(rows), gr(rows);
  for (int r = 0; r < rows; r++) {
    double mu = 0, var = 0;
    for (int c = 0; c < cols; c++) mu += x[r * cols + c];
    mu /= cols;
    for (int c = 0; c < cols; c++) var += (x[r * cols + c] - mu) * (x[r * cols + c] - mu);
    const double rs = 1 / std::sqrt(var / cols + 1e-5);
    wm[r] = mu, wr[r] = rs, gm[r] = mean[r], gr[r] = rstd[r];
    for (int c = 0; c < cols; c++)
      wy[r * cols + c] = (x[r * cols + c] - mu) * rs * (affine ? w[c] : 1) + (affine ? b[c] : 0);
  }
  const double tol = sizeof(Y) == 2 ? 8e-3 : 2e-6;
  const std::string tag = "layernorm " + std::string(yname) + " rows " + std::to_string(rows) + " cols " + std::to_string(cols) + (affine ? "" : " no w/b") + (shift != 3 ? " mean " + std::to_string(shift) : "");
  check(tag + " y", wide(y), wy, tol);
  check(tag + " mean", gm, wm, 2e-6);
  check(tag + " rstd", gr, wr, 2e-6);
  std::printf("%s\n", tag.c_str());
}

// layer norm backward: dx, and dw/db from partials through
// layernorm_dwdb_final, on the register path (V > 0: the words a lane
// holds) or the general one (V == 0: layernorm_backward_dx and
// layernorm_dwdb_partial). The reference takes xhat from the row's exact
// mean, as the CPU does (its float32 rounding alone is off by up to half
// an ulp of the mean, times rstd: most of the result for rows far from
// zero against their spread).
template <int V>
static void ln_backward(int rows, int cols, bool weighted, int chunks, float shift = 0, float scale = 2) {
  auto x = randn((size_t)rows * cols, scale), dy = randn((size_t)rows * cols, 1), w = randn(cols, 1);
  for (auto& v : x) v += shift;
  std::vector<float> mean(rows), rstd(rows);
  std::vector<double> mus(rows);
  for (int r = 0; r < rows; r++) {
    double mu = 0, var = 0;
    for (int c = 0; c < cols; c++) mu += x[r * cols + c];
    mu /= cols;
    for (int c = 0; c < cols; c++) var += (x[r * cols + c] - mu) * (x[r * cols + c] - mu);
    mus[r] = mu, mean[r] = (float)mu, rstd[r] = (float)(1 / std::sqrt(var / cols + 1e-5));
  }
  std::vector<float> dx((size_t)rows * cols);
  std::vector<double> part((size_t)2 * chunks * cols, NAN);
  const float* wp = weighted ? w.data() : nullptr;
  if constexpr (V > 0) {
    emu_launch((unsigned)chunks, 256, [&] {
      layernorm_backward_reg<V>(dx.data(), part.data(), dy.data(), x.data(), mean.data(), rstd.data(), wp, rows, cols);
    });
  } else {
    emu_launch((unsigned)((rows + 7) / 8), 256, [&] {
      layernorm_backward_dx<float>(dx.data(), dy.data(), x.data(), mean.data(), rstd.data(), wp, rows, cols);
    });
    const int rowsPer = (rows + chunks - 1) / chunks;
    chunks = (rows + rowsPer - 1) / rowsPer;
    emu_launch3({(unsigned)((cols + 31) / 32), (unsigned)chunks, 1}, {32, 8, 1}, [&] {
      layernorm_dwdb_partial<float>(part.data(), dy.data(), x.data(), mean.data(), rstd.data(), rows, cols, rowsPer);
    });
  }
  std::vector<float> dw(cols, NAN), db(cols, NAN);
  emu_launch((unsigned)((cols + 31) / 32), 32 * LN_FINAL_GROUPS,
             [&] { layernorm_dwdb_final<float>(dw.data(), db.data(), part.data(), cols, chunks); });
  std::vector<double> gdw = wide(dw), gdb = wide(db), wdw(cols, 0), wdb(cols, 0), wdx(dx.size());
  for (int r = 0; r < rows; r++) {
    double sg = 0, sgx = 0;
    for (int c = 0; c < cols; c++) {
      const double xh = ((double)x[r * cols + c] - mus[r]) * rstd[r], g = dy[r * cols + c] * (weighted ? w[c] : 1.0);
      sg += g, sgx += g * xh;
      wdw[c] += dy[r * cols + c] * xh, wdb[c] += dy[r * cols + c];
    }
    for (int c = 0; c < cols; c++) {
      const double xh = ((double)x[r * cols + c] - mus[r]) * rstd[r], g = dy[r * cols + c] * (weighted ? w[c] : 1.0);
      wdx[r * cols + c] = rstd[r] * (g - sg / cols - xh * sgx / cols);
    }
  }
  const std::string tag = "layernorm backward " + (V > 0 ? "V " + std::to_string(V) : std::string("general")) + " rows " + std::to_string(rows) + " cols " + std::to_string(cols) + " chunks " + std::to_string(chunks) + (weighted ? "" : " no w") + (shift != 0 ? " mean " + std::to_string(shift) : "");
  check(tag + " dx", wide(dx), wdx, 5e-6);
  check(tag + " dw", gdw, wdw, 5e-6);
  check(tag + " db", gdb, wdb, 5e-6);
  std::printf("%s\n", tag.c_str());
}

// fused cross-entropy, bfloat16 logits and gradient (GPT-2's head) and
// float32 ones, block and warp shapes; row 1 ignored, row 2 with -Inf
// logits; special rows (+Inf, NaN) must give NaN.
template <typename L, bool WARP>
static void ce_fused(int rows, int cols, int ld, const char* name) {
  auto xf = randn((size_t)rows * ld, 3);
  std::vector<L> x(xf.size());
  for (size_t i = 0; i < x.size(); i++) store_as(&x[i], xf[i]);
  std::vector<int> t(rows);
  for (int r = 0; r < rows; r++) t[r] = (int)(rng() % cols);
  if (rows > 1) t[1] = -100;
  if (rows > 2)
    for (int c = 0; c < cols; c += 3)
      if (c != t[2]) store_as(&x[2 * (size_t)ld + c], -INFINITY);
  const int special = rows - 2;  // +Inf in row rows-2, NaN in row rows-1
  store_as(&x[(size_t)special * ld + cols / 2], INFINITY);
  store_as(&x[(size_t)(rows - 1) * ld + cols / 3], NAN);
  std::vector<float> loss(rows, -1), dloss = randn(rows, 1);
  std::vector<L> d((size_t)rows * ld);
  Status st{};
  unsigned int claim = 0;
  const unsigned threads = WARP ? 256 : 512, grid = WARP ? (unsigned)((rows + 7) / 8) : (unsigned)rows;
  emu_launch(grid, threads, [&] {
    cross_entropy_fused<float, L, L, WARP>(loss.data(), d.data(), x.data(), t.data(), dloss.data(), rows, cols, ld, -100, &claim, &st);
  });
  std::vector<double> wl(rows), gl(rows), wd((size_t)rows * ld, 0);
  for (int r = 0; r < special; r++) {
    gl[r] = loss[r];
    if (t[r] == -100) continue;
    double m = -INFINITY, s = 0;
    for (int c = 0; c < cols; c++) m = std::max(m, (double)widen_any(x[(size_t)r * ld + c]));
    for (int c = 0; c < cols; c++) s += std::exp((double)widen_any(x[(size_t)r * ld + c]) - m);
    wl[r] = m + std::log(s) - widen_any(x[(size_t)r * ld + t[r]]);
    for (int c = 0; c < cols; c++)
      wd[(size_t)r * ld + c] = (std::exp((double)widen_any(x[(size_t)r * ld + c]) - m) / s - (c == t[r])) * dloss[r];
  }
  std::vector<double> gd = wide(d);
  for (int r = special; r < rows; r++)
    for (int c = 0; c < ld; c++) gd[(size_t)r * ld + c] = 0;  // checked below
  const std::string tag = std::string("cross_entropy_fused ") + name + (WARP ? " warp" : " block") + " rows " + std::to_string(rows) + " cols " + std::to_string(cols) + " ld " + std::to_string(ld);
  check(tag + " loss", gl, wl, 2e-6);
  check(tag + " dlogits", gd, wd, sizeof(L) == 2 ? 8e-3 : 2e-6);
  for (int r = special; r < rows; r++)
    if (!std::isnan(loss[r]) || !std::isnan(widen_any(d[(size_t)r * ld]))) {
      std::printf("    FAIL %s: row %d (%s) gives loss %g, gradient %g, want NaN\n", tag.c_str(), r, r == special ? "+Inf" : "NaN", loss[r], widen_any(d[(size_t)r * ld]));
      failures++;
    }
  if (claim != 0) std::printf("    FAIL %s: status %u\n", tag.c_str(), claim), failures++;
  std::printf("%s\n", tag.c_str());
}

// layer norm forward of float64 rows of one value (the general path), as
// cpukern's corrected two-pass mean gives them: y exactly 0 and the mean
// that value. The double sum of a row of 1e30 rounds, its mean was an ulp
// off, the deviations of an ulp gave a variance of an ulp squared, and y
// was +-1 (TestLayerNormConstantRowsFloat64 on the CPU).
static void ln_constant_f64() {
  for (double v : {1e30, -1e30, 3e29, -7.5e300, 1e-300}) {
    for (int cols : {1, 2, 3, 5, 7, 768}) {
      const int rows = 3;
      std::vector<double> x((size_t)rows * cols, v), y(x.size(), NAN), mean(rows, NAN), rstd(rows, NAN);
      emu_launch(1, 256, [&] {
        layernorm_any<double, double>(y.data(), mean.data(), rstd.data(), x.data(), nullptr, nullptr, rows, cols, 1e-5);
      });
      bool ok = true;
      for (double e : y) ok = ok && e == 0;
      for (double m : mean) ok = ok && m == v;
      if (!ok) {
        std::printf("    FAIL layernorm f64 constant row %g x %d: y[0] %g, mean %.17g\n", v, cols, y[0], mean[0]);
        failures++;
      }
    }
  }
  std::printf("layernorm f64 constant rows\n");
}

int main() {
  for (int cols : {4, 128, 132, 768, 1020, 1024}) {
    ln_forward<float>(5, cols, true, "f32");
    ln_forward<BF16>(9, cols, cols != 768, "bf16");
  }
  ln_forward<float>(3, 6, true, "f32 (general path)");
  ln_forward<float>(3, 1028, true, "f32 (general path)");
  // Rows far from zero against their spread (10000 + N(0, 0.01)): the
  // mean's rounding to float32 must not shift every output.
  for (int cols : {768, 770, 1028}) ln_forward<float>(4, cols, true, "f32", 10000, 0.01f);
  ln_constant_f64();
  ln_backward<1>(5, 4, true, 1);
  ln_backward<1>(37, 128, true, 3);
  ln_backward<2>(19, 132, false, 2);
  ln_backward<6>(37, 768, true, 3);
  ln_backward<6>(8, 764, true, 5);  // more blocks than rows: empty chunks
  ln_backward<8>(11, 1024, true, 2);
  ln_backward<6>(300, 768, true, 40);  // more chunks than the final's groups
  ln_backward<2>(1500, 200, true, 150);  // more than groups x ILP chunks
  ln_backward<0>(37, 770, true, 3);  // the general path
  ln_backward<0>(9, 1028, false, 2);
  // Rows far from zero against their spread (10000 + N(0, 0.01)).
  ln_backward<6>(37, 768, true, 3, 10000, 0.01f);
  ln_backward<0>(37, 770, true, 3, 10000, 0.01f);
  ln_backward<0>(9, 1028, false, 2, 10000, 0.01f);
  ce_fused<BF16, false>(5, 50257, 50304, "bf16");
  ce_fused<BF16, true>(6, 1000, 1000, "bf16");
  ce_fused<float, false>(5, 5000, 5004, "f32");
  ce_fused<float, true>(5, 13, 16, "f32");
  ce_fused<float, true>(5, 7, 7, "f32 unaligned");
  if (failures) {
    std::printf("%d FAILED\n", failures);
    return 1;
  }
  std::printf("all passed\n");
  return 0;
}
