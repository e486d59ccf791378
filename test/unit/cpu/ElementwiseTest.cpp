//===- ElementwiseTest.cpp - Pointwise kernels vs double ------------------===//
//
// Tolerance: rel L2 <= 1e-6 against double (FP32 math with a few roundings).
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/Elementwise.h"
#include "test/unit/cpu/CpuTestUtil.h"

#include <gtest/gtest.h>

#include <functional>

using namespace kiln::cpu;
using namespace kiln::cpu::test;

namespace {

constexpr double kTol = 1e-6;

void checkUnary(void (*kernel)(const float *, int64_t, float *),
                const std::function<double(double)> &ref, float lo, float hi) {
  std::mt19937 rng(1);
  const int64_t n = 1003;
  std::vector<float> x = randomFloats(rng, n, lo, hi),
                     y(static_cast<size_t>(n));
  std::vector<double> want(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    want[i] = ref(x[i]);
  kernel(x.data(), n, y.data());
  EXPECT_LE(relL2(y.data(), want.data(), n), kTol);
  kernel(x.data(), n, x.data()); // in place
  EXPECT_TRUE(sameBits(x, y));
}

double sigmoidRef(double v) { return 1.0 / (1.0 + std::exp(-v)); }

TEST(Elementwise, Silu) {
  checkUnary(silu, [](double v) { return v * sigmoidRef(v); }, -20, 20);
}

TEST(Elementwise, Sigmoid) { checkUnary(sigmoid, sigmoidRef, -20, 20); }

TEST(Elementwise, Relu) {
  checkUnary(relu, [](double v) { return v > 0 ? v : 0; }, -5, 5);
}

TEST(Elementwise, SiluSaturates) {
  const float x[] = {-200.0f, 200.0f, 0.0f};
  float y[3];
  silu(x, 3, y);
  EXPECT_EQ(y[0], 0.0f);
  EXPECT_EQ(y[1], 200.0f);
  EXPECT_EQ(y[2], 0.0f);
}

TEST(Elementwise, Scale) {
  std::mt19937 rng(2);
  std::vector<float> x = randomFloats(rng, 77), y(77);
  scale(x.data(), 77, -2.5f, y.data());
  for (int i = 0; i < 77; ++i)
    EXPECT_EQ(y[i], x[i] * -2.5f);
}

TEST(Elementwise, Swiglu) {
  std::mt19937 rng(3);
  const int64_t n = 999;
  std::vector<float> g = randomFloats(rng, n, -8, 8), u = randomFloats(rng, n);
  std::vector<float> y(static_cast<size_t>(n));
  std::vector<double> want(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    want[i] = double(g[i]) * sigmoidRef(g[i]) * u[i];
  swiglu(g.data(), u.data(), n, y.data());
  EXPECT_LE(relL2(y.data(), want.data(), n), kTol);
}

void checkBinary(void (*kernel)(const float *, const float *, int64_t, int64_t,
                                float *, bool),
                 const std::function<double(double, double)> &ref) {
  std::mt19937 rng(4);
  const int64_t rows = 7, cols = 33;
  std::vector<float> a = randomFloats(rng, rows * cols);
  std::vector<float> b = randomFloats(rng, rows * cols);
  for (bool rhsIsRow : {false, true}) {
    std::vector<float> y(static_cast<size_t>(rows * cols));
    std::vector<double> want(static_cast<size_t>(rows * cols));
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c)
        want[r * cols + c] =
            ref(a[r * cols + c], b[(rhsIsRow ? 0 : r) * cols + c]);
    kernel(a.data(), b.data(), rows, cols, y.data(), rhsIsRow);
    EXPECT_LE(relL2(y.data(), want.data(), rows * cols), kTol) << rhsIsRow;
  }
}

TEST(Elementwise, Add) {
  checkBinary(add, [](double a, double b) { return a + b; });
}

TEST(Elementwise, Mul) {
  checkBinary(mul, [](double a, double b) { return a * b; });
}

} // namespace
