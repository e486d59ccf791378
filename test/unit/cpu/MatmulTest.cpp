//===- MatmulTest.cpp - matmul against a double reference, every format ---===//
//
// Tolerance: with FP32 fused multiply-adds in 16 lanes and a 4-level tree,
// |y - y_exact| <= (ceil(K / 16) + 4) * 2^-24 * Σ_k |x_k w_k| (weights
// decoded exactly); the tests check that bound per element against a double
// reference on dequantizeRow() weights. The scalar, AVX2 and AVX-512 paths,
// 1 and 2 threads, and a token alone or in a batch must agree bit for bit.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/Matmul.h"
#include "test/unit/cpu/CpuTestUtil.h"

#include <gtest/gtest.h>

#include <limits>

using namespace kiln::cpu;
using namespace kiln::cpu::test;

namespace {

/// Checks y against Σ x·w in double within the bound in the file comment.
void expectNearReference(const std::vector<float> &y,
                         const std::vector<float> &x, int64_t T,
                         const TestWeight &w, const std::string &what) {
  const int64_t n = w.view.rows, k = w.view.cols;
  const std::vector<float> wd = w.dequantized();
  const double u = std::ldexp(1.0, -24);
  const double factor = double((k + 15) / 16 + 4) * u;
  int failures = 0;
  std::vector<double> ref(static_cast<size_t>(T * n));
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t r = 0; r < n; ++r) {
      double sum = 0, mag = 0;
      for (int64_t i = 0; i < k; ++i) {
        double p = double(x[t * k + i]) * double(wd[r * k + i]);
        sum += p;
        mag += std::fabs(p);
      }
      ref[t * n + r] = sum;
      double err = std::fabs(double(y[t * n + r]) - sum);
      if (!(err <= factor * mag) && failures++ < 5)
        ADD_FAILURE() << what << " t=" << t << " n=" << r << " got "
                      << y[t * n + r] << " want " << sum << " bound "
                      << factor * mag;
    }
  }
  EXPECT_LE(relL2(y.data(), ref.data(), T * n), 1e-5) << what;
}

struct Shape {
  int64_t n, k;
};

void checkFormat(WeightFormat format, const std::vector<Shape> &shapes) {
  ThreadPool one(1);
  std::mt19937 rng(1234 + int(format));
  for (const Shape &s : shapes) {
    TestWeight w = randomWeight(rng, format, s.n, s.k);
    for (int64_t T : {1, 2, 3, 4, 5, 7, 64, 70, 100}) {
      std::string what =
          std::string(formatName(format)) + " N=" + std::to_string(s.n) +
          " K=" + std::to_string(s.k) + " T=" + std::to_string(T);
      std::vector<float> x = randomFloats(rng, T * s.k);
      std::vector<float> y = runMatmul(one, x, T, w.view);
      expectNearReference(y, x, T, w, what);
      expectSameOnThreadsPathsAndBatch(y, x, T, w.view, what);
    }
  }
}

const std::vector<Shape> kShapes = {{1, 1},   {5, 15},   {37, 16},  {3, 17},
                                    {70, 33}, {33, 100}, {40, 513}, {9, 1100}};
const std::vector<Shape> kMxShapes = {
    {1, 32}, {37, 96}, {70, 256}, {33, 544}, {5, 1056}};

TEST(Matmul, F32) { checkFormat(WeightFormat::F32, kShapes); }
TEST(Matmul, BF16) { checkFormat(WeightFormat::BF16, kShapes); }
TEST(Matmul, F16) { checkFormat(WeightFormat::F16, kShapes); }
TEST(Matmul, FP8) { checkFormat(WeightFormat::FP8, kShapes); }
TEST(Matmul, MXFP4) { checkFormat(WeightFormat::MXFP4, kMxShapes); }

TEST(Matmul, FP8BlockScalesSpanRowsAndColumns) {
  // 300 x 300 has 3 x 3 scale blocks, the last ones partial.
  ThreadPool pool(2);
  std::mt19937 rng(7);
  TestWeight w = randomWeight(rng, WeightFormat::FP8, 300, 300);
  for (int64_t T : {1, 9}) {
    std::vector<float> x = randomFloats(rng, T * 300);
    expectNearReference(runMatmul(pool, x, T, w.view), x, T, w,
                        "FP8 300x300 T=" + std::to_string(T));
  }
}

/// Weight rows that each hold one value at one position and +0 elsewhere;
/// with x = 1 the output is exactly that value.
void expectSingleValues(TestWeight &w, const std::vector<double> &want) {
  ThreadPool pool(2);
  const int64_t n = w.view.rows, k = w.view.cols;
  for (int64_t T : {1, 6}) {
    for (const std::string &path : everyPath()) {
      std::vector<float> y;
      {
        PathScope scope(path);
        y = runMatmul(pool, std::vector<float>(size_t(T * k), 1.0f), T, w.view);
      }
      for (int64_t t = 0; t < T; ++t)
        for (int64_t r = 0; r < n; ++r) {
          float got = y[t * n + r];
          if (std::isnan(want[r]))
            EXPECT_TRUE(std::isnan(got)) << "row " << r << " T=" << T;
          else
            EXPECT_EQ(double(got), want[r])
                << "row " << r << " T=" << T << " path " << path;
        }
    }
  }
}

TEST(Matmul, MXFP4AllCodesAndScales) {
  const double e2m1[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
  const int exps[] = {0, 1, 100, 126, 127, 128, 200, 254, 255};
  const int64_t k = 64;
  TestWeight w;
  w.view.format = WeightFormat::MXFP4;
  w.view.cols = k;
  std::vector<double> want;
  for (int e : exps) {
    for (int code = 0; code < 16; ++code) {
      const int64_t r = w.view.rows++;
      const int64_t pos = (r * 13) % k; // odd and even nibbles, both blocks
      w.data.resize(size_t((r + 1) * k / 2), 0);
      w.scales.resize(size_t((r + 1) * k / 32), 127);
      w.data[size_t(r * k / 2 + pos / 2)] = uint8_t(pos % 2 ? code << 4 : code);
      w.scales[size_t(r * k / 32 + pos / 32)] = uint8_t(e);
      double mag = std::ldexp(e2m1[code & 7], e - 127);
      if (mag > double(std::numeric_limits<float>::max()))
        mag = std::numeric_limits<double>::infinity();
      want.push_back(e == 255 ? std::nan("") : (code & 8 ? -mag : mag));
    }
  }
  w.view.data = w.data.data();
  w.view.scales = w.scales.data();
  // e = 0 gives 2^-127 (subnormal, kept exactly): 0.5 * 2^-127 = 2^-128.
  ASSERT_EQ(want[1], std::ldexp(1.0, -128));
  expectSingleValues(w, want);
}

TEST(Matmul, FP8AllCodes) {
  const int64_t k = 40;
  for (float s : {1.0f, 0.375f, 1024.0f}) {
    TestWeight w;
    w.view.format = WeightFormat::FP8;
    w.view.rows = 256;
    w.view.cols = k;
    w.data.assign(size_t(256 * k), 0);
    std::vector<double> want;
    for (int code = 0; code < 256; ++code) {
      w.data[size_t(code * k + (code * 7) % k)] = uint8_t(code);
      const int sign = code >> 7, exp = (code >> 3) & 15, man = code & 7;
      double mag = exp == 0 ? man / 8.0 * std::ldexp(1.0, -6)
                            : (1 + man / 8.0) * std::ldexp(1.0, exp - 7);
      double v = (sign ? -mag : mag) * s;
      want.push_back((code & 0x7F) == 0x7F ? std::nan("") : v);
    }
    // Two row blocks of scales, both s.
    w.scales.resize(2 * 4);
    for (int i = 0; i < 2; ++i)
      std::memcpy(&w.scales[size_t(i) * 4], &s, 4);
    w.view.data = w.data.data();
    w.view.scales = w.scales.data();
    expectSingleValues(w, want);
  }
}

TEST(Matmul, MXFP4NaNScalePoisonsOnlyItsBlock) {
  ThreadPool pool(1);
  std::mt19937 rng(3);
  TestWeight w = randomWeight(rng, WeightFormat::MXFP4, 4, 64);
  w.scales[2 * 2 + 1] = 0xFF; // row 2, second block
  for (int64_t T : {1, 5}) {
    std::vector<float> y =
        runMatmul(pool, randomFloats(rng, T * 64), T, w.view);
    for (int64_t t = 0; t < T; ++t)
      for (int64_t r = 0; r < 4; ++r)
        EXPECT_EQ(std::isnan(y[t * 4 + r]), r == 2) << t << " " << r;
  }
}

TEST(Matmul, RowsIndexedAndAccumulated) {
  // y[yIndex[t]] += x[xIndex[t]] · Wᵀ over a column range.
  std::mt19937 rng(11);
  for (int64_t T : {2, 9}) {
    TestWeight w = randomWeight(rng, WeightFormat::BF16, 50, 70);
    std::vector<float> x = randomFloats(rng, 12 * 70);
    std::vector<int32_t> xi, yi;
    for (int64_t t = 0; t < T; ++t) {
      xi.push_back(int32_t((t * 5) % 12));
      yi.push_back(int32_t(T - 1 - t));
    }
    std::vector<float> y = randomFloats(rng, T * 64), before = y;
    MatmulRows io;
    io.x = x.data();
    io.xStride = 70;
    io.xIndex = xi.data();
    io.y = y.data();
    io.yStride = 64;
    io.yIndex = yi.data();
    io.tokens = T;
    io.accumulate = true;
    matmulRows(io, w.view, 10, 45);
    // The same products through matmul() on gathered rows.
    std::vector<float> gathered;
    for (int64_t t = 0; t < T; ++t)
      gathered.insert(gathered.end(), x.begin() + xi[t] * 70,
                      x.begin() + (xi[t] + 1) * 70);
    ThreadPool pool(1);
    std::vector<float> plain = runMatmul(pool, gathered, T, w.view);
    for (int64_t t = 0; t < T; ++t)
      for (int64_t n = 0; n < 64; ++n) {
        float want = before[yi[t] * 64 + n];
        if (n >= 10 && n < 45)
          want = want + plain[t * 50 + n];
        EXPECT_EQ(y[yi[t] * 64 + n], want) << t << " " << n;
      }
  }
}

void checkPanels(WeightFormat format) {
  // Same values, another layout: every path, thread count, batch size and
  // row range gives the bits of the row-major matrix, and dequantizeRow()
  // reads the same rows.
  ThreadPool one(1), two(2);
  std::mt19937 rng(77);
  for (Shape s : std::vector<Shape>{{4, 32}, {40, 96}, {68, 544}, {128, 64}}) {
    TestWeight rows = randomWeight(rng, format, s.n, s.k, 2);
    TestWeight panels = inPanels(rows);
    if (s.k > kiln::kPanelCols) // one 32-column chunk: the same bytes
      ASSERT_NE(rows.data, panels.data) << "the layouts must differ";
    for (int64_t e = 0; e < 2; ++e) {
      std::string what =
          std::string(formatName(format)) + " N=" + std::to_string(s.n) +
          " K=" + std::to_string(s.k) + " e=" + std::to_string(e);
      EXPECT_TRUE(sameBits(rows.dequantized(e), panels.dequantized(e))) << what;
      for (int64_t T : {1, 2, 3, 4, 5, 70}) {
        std::vector<float> x = randomFloats(rng, T * s.k);
        const WeightView rm = rows.view.expert(e), pm = panels.view.expert(e);
        std::vector<float> want = runMatmul(one, x, T, rm);
        std::string at = what + " T=" + std::to_string(T);
        EXPECT_TRUE(sameBits(want, runMatmul(one, x, T, pm))) << at;
        EXPECT_TRUE(sameBits(want, runMatmul(two, x, T, pm)))
            << at << " threads";
        for (const std::string &path : lowerPaths()) {
          PathScope scope(path);
          EXPECT_TRUE(sameBits(want, runMatmul(two, x, T, pm)))
              << at << " " << path;
          EXPECT_TRUE(sameBits(want, runMatmul(one, x, T, rm)))
              << at << " " << path << " rows";
        }
        // A row range that starts inside a panel.
        std::vector<float> y(size_t(T * s.n), 0.0f);
        MatmulRows io;
        io.x = x.data();
        io.xStride = s.k;
        io.y = y.data();
        io.yStride = s.n;
        io.tokens = T;
        matmulRows(io, pm, 1, s.n - 1);
        for (int64_t t = 0; t < T; ++t)
          for (int64_t n = 1; n < s.n - 1; ++n)
            ASSERT_EQ(y[t * s.n + n], want[t * s.n + n]) << at << " n=" << n;
      }
    }
  }
}

TEST(Matmul, BF16RowPanelsGiveTheRowMajorBits) {
  checkPanels(WeightFormat::BF16);
}
TEST(Matmul, MXFP4RowPanelsGiveTheRowMajorBits) {
  checkPanels(WeightFormat::MXFP4);
}

TEST(Matmul, ZeroTokensAndEmptyK) {
  ThreadPool pool(2);
  std::mt19937 rng(5);
  TestWeight w = randomWeight(rng, WeightFormat::F32, 8, 0);
  std::vector<float> y = runMatmul(pool, {}, 3, w.view);
  for (float v : y)
    EXPECT_EQ(v, 0.0f);
  TestWeight w2 = randomWeight(rng, WeightFormat::F32, 8, 4);
  std::vector<float> none = runMatmul(pool, {}, 0, w2.view);
  EXPECT_TRUE(none.empty());
}

} // namespace
