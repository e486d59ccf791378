//===- Fp8Reference.h - The native FP8 GEMM, computed as its kernels do ---===//
//
// The reference the native FP8 kernels (passes/codegen/rocdl/Fp8Tiles.h,
// qa = 1) are compared with, bit for bit: per row and 128-K block the
// activations are quantized to E4M3FN codes (round to nearest even of x *
// (448 / amax), scale amax / 448), the block's dot products of codes are
// formed exactly and rounded to f32 as the interpreter's MFMAs do (gfx950:
// one 16x16x128 MFMA, one rounding; gfx942: four 16x16x32 MFMAs, K
// {32 g + 8 j + [0, 8)} the j-th, a rounding each), and the f32 partial
// sum is added as fmaf(P, s_a * s_w, acc).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TEST_UNIT_ROCDL_FP8REFERENCE_H
#define KILN_TEST_UNIT_ROCDL_FP8REFERENCE_H

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace kiln::rocdl::fp8ref {

/// The exact value of an E4M3FN code (the NaN codes 0x7F / 0xFF as 480).
inline double e4m3Value(uint8_t code) {
  int e = (code >> 3) & 0xF, m = code & 7;
  double v = e == 0 ? std::ldexp(m, -9) : std::ldexp(8 + m, e - 10);
  return code & 0x80 ? -v : v;
}

/// The E4M3FN code nearest to v (|v| <= 448), ties to the even code.
inline uint8_t e4m3Round(float v) {
  double a = std::fabs(double(v));
  uint8_t best = 0;
  for (uint8_t c = 1; c < 0x7F; ++c) {
    double d = std::fabs(e4m3Value(c) - a), db = std::fabs(e4m3Value(best) - a);
    if (d < db || (d == db && (c & 1) == 0))
      best = c;
  }
  return uint8_t(best | (v < 0 ? 0x80 : 0));
}

/// y [m, n] = x [m, k] * W^T for W = q [n, k] (E4M3FN) with f32 scales
/// [ceil(n / 128), ceil(k / 128)]; `k128`: gfx950's one MFMA per block.
inline std::vector<float> gemm(const float *x, int64_t m, const uint8_t *q,
                               const float *scales, int64_t n, int64_t k,
                               bool k128) {
  const int64_t blocks = (k + 127) / 128;
  std::vector<float> y(size_t(m * n), 0.0f);
  std::vector<uint8_t> qa(128);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t blk = 0; blk < blocks; ++blk) {
      const int64_t k0 = blk * 128, len = std::min<int64_t>(128, k - k0);
      const float *xr = x + i * k + k0;
      float amax = 0.0f;
      for (int64_t c = 0; c < len; ++c)
        amax = std::max(amax, std::fabs(xr[c]));
      const float inv = amax > 0.0f ? 448.0f / amax : 0.0f;
      const float sa = amax / 448.0f;
      for (int64_t c = 0; c < len; ++c)
        qa[size_t(c)] = e4m3Round(xr[c] * inv);
      for (int64_t j = 0; j < n; ++j) {
        const uint8_t *w = q + j * k + k0;
        auto dot = [&](int64_t part) {
          double s = 0;
          for (int64_t c = 0; c < len; ++c)
            if (part < 0 || c % 32 / 8 == part)
              s += e4m3Value(qa[size_t(c)]) * e4m3Value(w[c]);
          return s;
        };
        float p = 0.0f;
        if (k128)
          p = float(dot(-1));
        else
          for (int64_t part = 0; part < 4; ++part)
            p = float(double(p) + dot(part));
        const float sw = scales[(j / 128) * blocks + blk];
        float &out = y[size_t(i * n + j)];
        out = std::fma(p, sa * sw, out);
      }
    }
  return y;
}

} // namespace kiln::rocdl::fp8ref

#endif // KILN_TEST_UNIT_ROCDL_FP8REFERENCE_H
