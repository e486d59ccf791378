//===- MatmulQ8Test.cpp - MXFP4 with int8 activations ---------------------===//
//
// The contract of MatmulQ8.h, checked three ways: the quantized blocks
// against the formula; the outputs against a double sum over the same
// int8 values (so only the float accumulation may differ, within a bound);
// and bit-identity across the scalar and VNNI paths, threads, batch sizes,
// row ranges and the two weight layouts. The cost of the int8 rounding
// against the exact path is measured and bounded here too.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/MatmulQ8.h"
#include "runtime/cpu/CpuFeatures.h"
#include "runtime/cpu/Matmul.h"
#include "test/unit/cpu/CpuTestUtil.h"

#include <gtest/gtest.h>

#include <limits>

using namespace kiln::cpu;
using namespace kiln::cpu::test;

namespace {

/// A row of 32-value blocks that exercises the rounding: ties, values that
/// round to the clamp, an all-zero block and tiny magnitudes.
std::vector<float> awkwardRow(std::mt19937 &rng, int64_t K) {
  std::vector<float> x = randomFloats(rng, K, -3.0f, 3.0f);
  for (int64_t i = 0; i < std::min<int64_t>(32, K); ++i)
    x[i] = 0.0f;
  if (K >= 64) { // amax 127, so d = 1: halves tie to the even integer
    x[32] = 127.0f;
    for (int64_t i = 33; i < 64; ++i)
      x[i] = float(int(i) - 48) + 0.5f;
  }
  if (K >= 96)
    for (int64_t i = 64; i < 96; ++i)
      x[i] *= 1e-30f;
  return x;
}

void expectBlocksEqual(const std::vector<Q8Block> &a,
                       const std::vector<Q8Block> &b, const std::string &what) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(0, std::memcmp(a[i].even, b[i].even, 16))
        << what << " block " << i;
    EXPECT_EQ(0, std::memcmp(a[i].odd, b[i].odd, 16)) << what << " block " << i;
    EXPECT_EQ(0, std::memcmp(a[i].negCorr, b[i].negCorr, 16))
        << what << " block " << i;
    EXPECT_EQ(0, std::memcmp(&a[i].halfScale, &b[i].halfScale, 4))
        << what << " block " << i;
  }
}

TEST(MatmulQ8, QuantizesAsTheContractSays) {
  std::mt19937 rng(11);
  const int64_t K = 160;
  std::vector<float> x = awkwardRow(rng, K);
  std::vector<Q8Block> q(K / 32);
  quantizeQ8Scalar(x.data(), K, q.data());
  for (int64_t b = 0; b < K / 32; ++b) {
    float amax = 0;
    for (int i = 0; i < 32; ++i)
      amax = std::max(amax, std::fabs(x[32 * b + i]));
    const float d = amax / 127.0f;
    EXPECT_EQ(q[b].halfScale, d / 2) << b;
    int32_t sums[4] = {};
    for (int i = 0; i < 32; ++i) {
      const int8_t got = i % 2 ? q[b].odd[i / 2] : q[b].even[i / 2];
      const float want =
          d == 0 ? 0.0f : std::nearbyint(x[32 * b + i] * (1 / d));
      EXPECT_EQ(float(got), want) << "block " << b << " value " << i;
      EXPECT_LE(std::abs(int(got)), 127);
      sums[i / 8] += got;
    }
    for (int j = 0; j < 4; ++j)
      EXPECT_EQ(q[b].negCorr[j], -12 * sums[j]) << b << " lane " << j;
  }
  // The block of halves with d = 1: each tie goes to the even neighbour.
  EXPECT_EQ(q[1].even[0], 127);
  EXPECT_EQ(q[1].odd[0], -14);  // -14.5
  EXPECT_EQ(q[1].even[1], -14); // -13.5
  EXPECT_EQ(q[1].odd[1], -12);  // -12.5
}

TEST(MatmulQ8, NonFiniteActivationsPoisonTheirBlock) {
  const int64_t K = 64;
  std::vector<float> x(K, 0.25f);
  x[40] = std::numeric_limits<float>::infinity();
  std::vector<Q8Block> q(2);
  quantizeQ8Scalar(x.data(), K, q.data());
  EXPECT_FALSE(std::isnan(q[0].halfScale));
  EXPECT_TRUE(std::isnan(q[1].halfScale));
  for (int i = 0; i < 16; ++i)
    EXPECT_EQ(q[1].even[i] | q[1].odd[i], 0);
  if (useAvx512Vnni()) {
    std::vector<Q8Block> v(2);
    quantizeQ8Avx512(x.data(), K, v.data());
    expectBlocksEqual(q, v, "inf");
    x[40] = std::numeric_limits<float>::quiet_NaN();
    quantizeQ8Scalar(x.data(), K, q.data());
    quantizeQ8Avx512(x.data(), K, v.data());
    expectBlocksEqual(q, v, "nan");
  }
}

TEST(MatmulQ8, VectorQuantizerGivesTheScalarBits) {
  if (!useAvx512Vnni())
    GTEST_SKIP() << "no AVX-512 VNNI here: " << cpuSummary();
  std::mt19937 rng(12);
  for (int64_t K : {32, 96, 2048}) {
    std::vector<float> x = awkwardRow(rng, K);
    std::vector<Q8Block> s(K / 32), v(K / 32);
    quantizeQ8Scalar(x.data(), K, s.data());
    quantizeQ8Avx512(x.data(), K, v.data());
    expectBlocksEqual(s, v, "K=" + std::to_string(K));
  }
}

/// y against Σ_b m_b Σ_i (2 e2m1) q_i in double, from the test's own
/// quantization: the float accumulation of MatmulQ8.h errs at most
/// (blocks + 2) * 2^-24 * Σ |terms| (one fma per block, two adds).
void expectNearInt8Reference(const std::vector<float> &y,
                             const std::vector<float> &x, int64_t T,
                             const TestWeight &w, const std::string &what) {
  const int64_t n = w.view.rows, k = w.view.cols, blocks = k / 32;
  const std::vector<float> wd = w.dequantized();
  int failures = 0;
  for (int64_t t = 0; t < T; ++t) {
    std::vector<double> xq(static_cast<size_t>(k));
    for (int64_t b = 0; b < blocks; ++b) {
      float amax = 0;
      for (int i = 0; i < 32; ++i)
        amax = std::max(amax, std::fabs(x[t * k + 32 * b + i]));
      const float d = amax / 127.0f;
      for (int i = 0; i < 32; ++i)
        xq[32 * b + i] =
            d == 0
                ? 0.0
                : double(d) * std::nearbyint(x[t * k + 32 * b + i] * (1 / d));
    }
    for (int64_t r = 0; r < n; ++r) {
      double sum = 0, mag = 0;
      for (int64_t i = 0; i < k; ++i) {
        sum += xq[i] * wd[r * k + i];
        mag += std::fabs(xq[i] * wd[r * k + i]);
      }
      const double bound = double(blocks + 2) * std::ldexp(1.0, -24) * mag;
      const double err = std::fabs(double(y[t * n + r]) - sum);
      if (!(err <= bound) && failures++ < 5)
        ADD_FAILURE() << what << " t=" << t << " n=" << r << " got "
                      << y[t * n + r] << " want " << sum << " bound " << bound;
    }
  }
}

struct Shape {
  int64_t n, k;
};

TEST(MatmulQ8, EveryPathThreadAndBatchGivesTheSameBits) {
  Int8ActivationsScope int8;
  ThreadPool one(1), two(2);
  std::mt19937 rng(13);
  for (Shape s : std::vector<Shape>{{4, 32}, {37, 96}, {68, 544}, {9, 1056}}) {
    TestWeight rows = randomWeight(rng, WeightFormat::MXFP4, s.n, s.k);
    const bool panelable = s.n % kiln::kPanelRows == 0;
    for (int64_t T : {1, 2, 3, 4, 5, 8, 9, 17, 70}) {
      const std::string what = "N=" + std::to_string(s.n) +
                               " K=" + std::to_string(s.k) +
                               " T=" + std::to_string(T);
      std::vector<float> x = randomFloats(rng, T * s.k, -2.0f, 2.0f);
      std::vector<float> y = runMatmul(one, x, T, rows.view);
      expectNearInt8Reference(y, x, T, rows, what);
      expectSameOnThreadsPathsAndBatch(y, x, T, rows.view, what);
      if (panelable) {
        TestWeight panels = inPanels(rows);
        EXPECT_TRUE(sameBits(y, runMatmul(two, x, T, panels.view)))
            << what << " panels";
        ScalarScope scalar;
        EXPECT_TRUE(sameBits(y, runMatmul(one, x, T, panels.view)))
            << what << " panels scalar";
      }
    }
  }
}

TEST(MatmulQ8, RowRangesInsidePanelsAccumulate) {
  Int8ActivationsScope int8;
  std::mt19937 rng(14);
  TestWeight panels = inPanels(randomWeight(rng, WeightFormat::MXFP4, 68, 256));
  expectRowRangesAccumulate(panels.view, rng);
}

TEST(MatmulQ8, PrequantizedRowsGiveTheSameBits) {
  // MatmulRows::xQ8 from quantizeRowsQ8() against quantizing in the call.
  Int8ActivationsScope int8;
  std::mt19937 rng(16);
  const int64_t N = 40, K = 192, rows = 9;
  TestWeight w = inPanels(randomWeight(rng, WeightFormat::MXFP4, N, K));
  std::vector<float> x = randomFloats(rng, rows * K);
  ThreadPool pool(2);
  std::vector<Q8Block> q(size_t(rows * K / 32));
  quantizeRowsQ8(pool, x.data(), K, rows, K, q.data());
  expectPreparedRowsGiveTheSameBits(w.view, x,
                                    [&](MatmulRows &io) { io.xQ8 = q.data(); });
}

TEST(MatmulQ8, Int8RoundingCostsLittleAgainstTheExactPath) {
  // Recorded in docs/cpu.md.
  const double err =
      modeErrorAgainstExact<Int8ActivationsScope>(WeightFormat::MXFP4, 15);
  EXPECT_GT(err, 0.0) << "the int8 path must actually run";
  EXPECT_LT(err, 1e-2);
}

TEST(MatmulQ8, ModeIsNamedAndChecked) {
  std::string error;
  EXPECT_FALSE(setMxfp4Activations("int4", &error));
  EXPECT_NE(error.find("'int4'"), std::string::npos) << error;
  EXPECT_EQ(mxfp4Activations(), Mxfp4Activations::F32);
  {
    Int8ActivationsScope int8;
    EXPECT_EQ(mxfp4Activations(), Mxfp4Activations::Int8);
    EXPECT_NE(cpuSummary().find("mxfp4 activations: int8"), std::string::npos)
        << cpuSummary();
  }
  EXPECT_NE(cpuSummary().find("mxfp4 activations: f32"), std::string::npos);
}

} // namespace
