//===- CpuTestUtil.h - Shared helpers for the CPU kernel tests --*- C++ -*-===//
//
// Random inputs, weights of every format with their storage, double
// references and error measures.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TEST_UNIT_CPU_CPUTESTUTIL_H
#define KILN_TEST_UNIT_CPU_CPUTESTUTIL_H

#include "runtime/cpu/CpuFeatures.h"
#include "runtime/cpu/Dequant.h"
#include "runtime/cpu/Matmul.h"
#include "runtime/cpu/Types.h"
#include "support/WeightPanels.h"
#include "test/unit/cpu/ModeScopes.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace kiln::cpu::test {

inline std::vector<float> randomFloats(std::mt19937 &rng, int64_t n,
                                       float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(size_t(n), 0.0f);
  for (float &f : v)
    f = dist(rng);
  return v;
}

/// sqrt(Σ (a - b)²) / sqrt(Σ b²), in double.
inline double relL2(const float *a, const double *ref, int64_t n) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < n; ++i) {
    double d = double(a[i]) - ref[i];
    num += d * d;
    den += ref[i] * ref[i];
  }
  return den == 0 ? std::sqrt(num) : std::sqrt(num / den);
}

inline double relL2(const std::vector<float> &a, const std::vector<float> &b) {
  std::vector<double> ref(b.begin(), b.end());
  return relL2(a.data(), ref.data(), int64_t(a.size()));
}

/// Bitwise equality, except that any two NaNs are equal.
inline bool sameBits(const std::vector<float> &a, const std::vector<float> &b) {
  if (a.size() != b.size())
    return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) && std::isnan(b[i]))
      continue;
    if (std::memcmp(&a[i], &b[i], 4) != 0)
      return false;
  }
  return true;
}

inline const char *formatName(WeightFormat f) {
  switch (f) {
  case WeightFormat::F32:
    return "F32";
  case WeightFormat::BF16:
    return "BF16";
  case WeightFormat::F16:
    return "F16";
  case WeightFormat::FP8:
    return "FP8";
  case WeightFormat::MXFP4:
    return "MXFP4";
  }
  return "?";
}

/// A weight (or a stack of `count`) with the bytes it points at.
struct TestWeight {
  std::vector<uint8_t> data, scales;
  WeightView view;

  /// Matrix e as FP32 [rows, cols], decoded by dequantizeRow().
  std::vector<float> dequantized(int64_t e = 0) const {
    WeightView m = view.expert(e);
    std::vector<float> out(size_t(m.rows * m.cols));
    for (int64_t r = 0; r < m.rows; ++r)
      dequantizeRow(m, r, out.data() + r * m.cols);
    return out;
  }
};

/// Random finite weights of `format`, `count` matrices of [rows, cols]
/// (MXFP4 needs cols % 32 == 0). Values are roughly in [-1, 1]; MXFP4 uses
/// scale exponents 124..128 and FP8 scales in [0.5, 2).
inline TestWeight randomWeight(std::mt19937 &rng, WeightFormat format,
                               int64_t rows, int64_t cols, int64_t count = 1) {
  TestWeight w;
  w.view.format = format;
  w.view.rows = rows;
  w.view.cols = cols;
  w.view.count = count;
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  std::uniform_int_distribution<int> byte(0, 255);
  switch (format) {
  case WeightFormat::F32: {
    w.view.dataStride = rows * cols * 4;
    w.data.resize(size_t(w.view.dataStride * count));
    for (int64_t i = 0; i < rows * cols * count; ++i) {
      float f = uni(rng);
      std::memcpy(&w.data[size_t(i) * 4], &f, 4);
    }
    break;
  }
  case WeightFormat::BF16:
  case WeightFormat::F16: {
    w.view.dataStride = rows * cols * 2;
    w.data.resize(size_t(w.view.dataStride * count));
    for (int64_t i = 0; i < rows * cols * count; ++i) {
      uint16_t h;
      if (format == WeightFormat::BF16) {
        h = floatToBf16(uni(rng));
      } else { // sign, exponent 0..15 (values up to 1), any mantissa
        h = uint16_t((byte(rng) & 1) << 15 | (byte(rng) % 16) << 10 |
                     ((byte(rng) << 2) ^ byte(rng)) & 0x3FF);
      }
      std::memcpy(&w.data[size_t(i) * 2], &h, 2);
    }
    break;
  }
  case WeightFormat::FP8: {
    const int64_t sr = (rows + 127) / 128, sc = (cols + 127) / 128;
    w.view.dataStride = rows * cols;
    w.view.scaleStride = sr * sc * 4;
    w.data.resize(size_t(rows * cols * count));
    for (uint8_t &b : w.data) {
      do
        b = uint8_t(byte(rng));
      while ((b & 0x7F) == 0x7F); // no NaN codes here
    }
    w.scales.resize(size_t(w.view.scaleStride * count));
    std::uniform_real_distribution<float> sd(0.5f, 2.0f);
    for (int64_t i = 0; i < sr * sc * count; ++i) {
      float s = sd(rng) / 64.0f;
      std::memcpy(&w.scales[size_t(i) * 4], &s, 4);
    }
    break;
  }
  case WeightFormat::MXFP4: {
    w.view.dataStride = rows * cols / 2;
    w.view.scaleStride = rows * cols / 32;
    w.data.resize(size_t(w.view.dataStride * count));
    for (uint8_t &b : w.data)
      b = uint8_t(byte(rng));
    w.scales.resize(size_t(w.view.scaleStride * count));
    std::uniform_int_distribution<int> exp(124, 128);
    for (uint8_t &s : w.scales)
      s = uint8_t(exp(rng));
    break;
  }
  }
  w.view.data = w.data.data();
  w.view.scales = w.scales.empty() ? nullptr : w.scales.data();
  return w;
}

/// The matrices of `w` (BF16 or MXFP4) repacked into row panels
/// (support/WeightPanels.h).
inline TestWeight inPanels(const TestWeight &w) {
  TestWeight p = w;
  const WeightView &v = w.view;
  for (int64_t e = 0; e < v.count; ++e) {
    if (v.format == WeightFormat::BF16) {
      kiln::packPanels(w.data.data() + e * v.dataStride,
                       p.data.data() + e * v.dataStride, v.rows, v.cols, 2);
      continue;
    }
    kiln::packPanels(w.data.data() + e * v.dataStride,
                     p.data.data() + e * v.dataStride, v.rows, v.cols / 2, 1,
                     kiln::kPanelCols / 2);
    kiln::packPanels(w.scales.data() + e * v.scaleStride,
                     p.scales.data() + e * v.scaleStride, v.rows, v.cols / 32,
                     1, 1);
  }
  p.view.data = p.data.data();
  p.view.scales = p.scales.empty() ? nullptr : p.scales.data();
  p.view.panelRows = kiln::kPanelRows;
  return p;
}

/// matmul() of x [T, w.cols] into a new y [T, w.rows], filled with a
/// sentinel first so that an output the kernel skips shows.
inline std::vector<float> runMatmul(ThreadPool &pool,
                                    const std::vector<float> &x, int64_t T,
                                    const WeightView &w) {
  std::vector<float> y(size_t(T * w.rows), -12345.0f);
  matmul(pool, x.data(), T, w, y.data());
  return y;
}

/// Makes the kernels take path `name` (setCpuPath: best, scalar, avx2,
/// avx512) while alive.
class PathScope {
public:
  explicit PathScope(const std::string &name) { setCpuPath(name, nullptr); }
  ~PathScope() { setForceScalar(false); }
};

/// The forced paths this CPU can run below its best: "scalar", and "avx2"
/// where the CPU has AVX2 and something better.
inline std::vector<std::string> lowerPaths() {
  std::vector<std::string> paths = {"scalar"};
  if (cpuHasAvx2() && bestCpuPath() == CpuPath::Avx512)
    paths.push_back("avx2");
  return paths;
}

/// "best", then lowerPaths().
inline std::vector<std::string> everyPath() {
  std::vector<std::string> paths = lowerPaths();
  paths.insert(paths.begin(), "best");
  return paths;
}

/// y, the 1-thread result of x [T, w.cols] · wᵀ, must come out bit for bit
/// on 2 threads, on the scalar path, and for the last token alone.
inline void expectSameOnThreadsPathsAndBatch(const std::vector<float> &y,
                                             const std::vector<float> &x,
                                             int64_t T, const WeightView &w,
                                             const std::string &what) {
  ThreadPool one(1), two(2);
  EXPECT_TRUE(sameBits(y, runMatmul(two, x, T, w))) << what << " threads";
  for (const std::string &path : lowerPaths()) {
    PathScope scope(path);
    EXPECT_TRUE(sameBits(y, runMatmul(two, x, T, w))) << what << " " << path;
  }
  std::vector<float> last(x.end() - w.cols, x.end());
  EXPECT_TRUE(sameBits(runMatmul(one, last, 1, w),
                       std::vector<float>(y.end() - w.rows, y.end())))
      << what << " batch";
}

/// Rows [1, N - 1) of the panelled weight `panels` [N, K], added onto
/// y = 1 on both paths: the panel edges take the one-row kernel and must
/// give the whole-panel bits of matmul().
inline void expectRowRangesAccumulate(const WeightView &panels,
                                      std::mt19937 &rng) {
  const int64_t N = panels.rows, K = panels.cols;
  ThreadPool one(1);
  for (int64_t T : {1, 3, 11}) {
    std::vector<float> x = randomFloats(rng, T * K);
    std::vector<float> want = runMatmul(one, x, T, panels);
    for (const std::string &path : everyPath()) {
      std::vector<float> y(size_t(T * N), 1.0f);
      MatmulRows io;
      io.x = x.data();
      io.xStride = K;
      io.y = y.data();
      io.yStride = N;
      io.tokens = T;
      io.accumulate = true;
      {
        PathScope scope(path);
        matmulRows(io, panels, 1, N - 1);
      }
      for (int64_t t = 0; t < T; ++t)
        for (int64_t n = 0; n < N; ++n) {
          const float expect =
              n == 0 || n == N - 1 ? 1.0f : 1.0f + want[t * N + n];
          ASSERT_EQ(y[t * N + n], expect)
              << "T=" << T << " n=" << n << " path " << path;
        }
    }
  }
}

/// matmulRows() of `w` over rows of x [rows, w.cols] gathered through an
/// index, with the activations converted inside the call and then taken
/// from `prepare(io)` (which sets MatmulRows::xQ8 or xBf16): the same bits,
/// on both paths.
template <class Prepare>
void expectPreparedRowsGiveTheSameBits(const WeightView &w,
                                       const std::vector<float> &x,
                                       Prepare prepare) {
  const std::vector<int32_t> index = {8, 0, 3, 3, 7, 1};
  for (bool scalar : {false, true}) {
    setForceScalar(scalar);
    MatmulRows io;
    io.x = x.data();
    io.xStride = w.cols;
    io.xIndex = index.data();
    io.yStride = w.rows;
    io.tokens = int64_t(index.size());
    std::vector<float> want(index.size() * size_t(w.rows)),
        got(index.size() * size_t(w.rows));
    io.y = want.data();
    matmulRows(io, w, 0, w.rows);
    prepare(io);
    io.y = got.data();
    matmulRows(io, w, 0, w.rows);
    setForceScalar(false);
    EXPECT_TRUE(sameBits(want, got)) << "scalar=" << scalar;
  }
}

/// What an activation mode gives up, on weights and activations like a
/// model's: the relative L2 of a 256 x 2048 matmul of `format` (8 tokens)
/// under the mode `Scope` sets, against the exact path.
template <class Scope>
double modeErrorAgainstExact(WeightFormat format, unsigned seed) {
  std::mt19937 rng(seed);
  TestWeight w = randomWeight(rng, format, 256, 2048);
  ThreadPool pool(2);
  std::vector<float> x = randomFloats(rng, 8 * 2048);
  std::vector<float> exact = runMatmul(pool, x, 8, w.view);
  Scope mode;
  return relL2(runMatmul(pool, x, 8, w.view), exact);
}

} // namespace kiln::cpu::test

#endif // KILN_TEST_UNIT_CPU_CPUTESTUTIL_H
