//===- NormTest.cpp - RMSNorm and LayerNorm vs double ---------------------===//
//
// Tolerance: rel L2 <= 1e-6 against double.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/Norm.h"
#include "test/unit/cpu/CpuTestUtil.h"

#include <gtest/gtest.h>

using namespace kiln::cpu;
using namespace kiln::cpu::test;

namespace {

TEST(Norm, RmsNormMatchesGlm) {
  std::mt19937 rng(1);
  for (int64_t dim : {1, 7, 64, 6144}) {
    const int64_t rows = 5;
    std::vector<float> x = randomFloats(rng, rows * dim, -3, 3);
    std::vector<float> w = randomFloats(rng, dim, 0.5, 1.5);
    for (bool withWeight : {true, false}) {
      std::vector<float> y(static_cast<size_t>(rows * dim));
      std::vector<double> want(static_cast<size_t>(rows * dim));
      for (int64_t r = 0; r < rows; ++r) {
        double ss = 0;
        for (int64_t i = 0; i < dim; ++i)
          ss += double(x[r * dim + i]) * x[r * dim + i];
        double inv = 1.0 / std::sqrt(ss / dim + 1e-5);
        for (int64_t i = 0; i < dim; ++i)
          want[r * dim + i] = x[r * dim + i] * inv * (withWeight ? w[i] : 1.0);
      }
      rmsNorm(x.data(), rows, dim, withWeight ? w.data() : nullptr, 1e-5f,
              y.data());
      EXPECT_LE(relL2(y.data(), want.data(), rows * dim), 1e-6) << dim;
      std::vector<float> inPlace = x;
      rmsNorm(inPlace.data(), rows, dim, withWeight ? w.data() : nullptr, 1e-5f,
              inPlace.data());
      EXPECT_TRUE(sameBits(inPlace, y));
    }
  }
}

TEST(Norm, RmsNormZeroRowIsZero) {
  std::vector<float> x(16, 0.0f), y(16, 1.0f);
  rmsNorm(x.data(), 1, 16, nullptr, 1e-5f, y.data());
  for (float v : y)
    EXPECT_EQ(v, 0.0f);
}

TEST(Norm, LayerNorm) {
  std::mt19937 rng(2);
  for (int64_t dim : {1, 9, 128, 1000}) {
    const int64_t rows = 4;
    // An offset mean checks the variance is taken around the mean.
    std::vector<float> x = randomFloats(rng, rows * dim, 9, 11);
    std::vector<float> w = randomFloats(rng, dim), b = randomFloats(rng, dim);
    std::vector<float> y(static_cast<size_t>(rows * dim));
    std::vector<double> want(static_cast<size_t>(rows * dim));
    for (int64_t r = 0; r < rows; ++r) {
      double mean = 0, var = 0;
      for (int64_t i = 0; i < dim; ++i)
        mean += x[r * dim + i];
      mean /= dim;
      for (int64_t i = 0; i < dim; ++i)
        var += (x[r * dim + i] - mean) * (x[r * dim + i] - mean);
      var /= dim;
      for (int64_t i = 0; i < dim; ++i)
        want[r * dim + i] =
            (x[r * dim + i] - mean) / std::sqrt(var + 1e-5) * w[i] + b[i];
    }
    layerNorm(x.data(), rows, dim, w.data(), b.data(), 1e-5f, y.data());
    EXPECT_LE(relL2(y.data(), want.data(), rows * dim), 1e-6) << dim;
  }
}

} // namespace
