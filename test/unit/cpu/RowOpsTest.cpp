//===- RowOpsTest.cpp - softmax, argmax, topK, groupLimit, gather, normalize =//
//
// Selections are compared exactly with a sort-based reference; softmax and
// normalize within rel L2 1e-6 of double.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/RowOps.h"
#include "test/unit/cpu/CpuTestUtil.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <numeric>

using namespace kiln::cpu;
using namespace kiln::cpu::test;

namespace {

const float kInf = std::numeric_limits<float>::infinity();

/// Column indices of a row, best first: larger value, then lower index.
std::vector<int32_t> ranking(const float *row, int64_t cols) {
  std::vector<int32_t> idx(static_cast<size_t>(cols));
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(),
                   [&](int32_t a, int32_t b) { return row[a] > row[b]; });
  return idx;
}

TEST(RowOps, Softmax) {
  std::mt19937 rng(1);
  const int64_t rows = 6, cols = 301;
  std::vector<float> x = randomFloats(rng, rows * cols, -30, 30);
  x[5] = -kInf; // masked entries get 0
  std::vector<float> y(x.size());
  std::vector<double> want(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    double m = *std::max_element(&x[r * cols], &x[r * cols] + cols), s = 0;
    for (int64_t c = 0; c < cols; ++c)
      s += std::exp(double(x[r * cols + c]) - m);
    for (int64_t c = 0; c < cols; ++c)
      want[r * cols + c] = std::exp(double(x[r * cols + c]) - m) / s;
  }
  softmax(x.data(), rows, cols, y.data());
  EXPECT_LE(relL2(y.data(), want.data(), rows * cols), 1e-6);
  EXPECT_EQ(y[5], 0.0f);
}

TEST(RowOps, ArgmaxTiesToLowerIndex) {
  const float x[] = {1, 3, 3, 2, /**/ -1, -1, -1, -1, /**/ 0, 0, 5, 5};
  int32_t idx[3];
  argmax(x, 3, 4, idx);
  EXPECT_EQ(idx[0], 1);
  EXPECT_EQ(idx[1], 0);
  EXPECT_EQ(idx[2], 2);
  const float withNan[] = {std::nanf(""), -5, -7};
  argmax(withNan, 1, 3, idx);
  EXPECT_EQ(idx[0], 1);
}

TEST(RowOps, TopKMatchesSortedOrder) {
  std::mt19937 rng(2);
  for (int64_t cols : {1, 8, 37, 256, 1000}) {
    const int64_t rows = 3;
    std::vector<float> x = randomFloats(rng, rows * cols);
    // Rounded values make many ties.
    for (int64_t i = 0; i < rows * cols; i += 2)
      x[i] = std::round(x[i] * 4) / 4;
    for (int64_t k : {int64_t(1), std::min<int64_t>(cols, 8),
                      std::min<int64_t>(cols, 33), cols}) {
      std::vector<float> v(static_cast<size_t>(rows * k));
      std::vector<int32_t> idx(static_cast<size_t>(rows * k));
      topK(x.data(), rows, cols, k, v.data(), idx.data());
      for (int64_t r = 0; r < rows; ++r) {
        std::vector<int32_t> want = ranking(&x[r * cols], cols);
        for (int64_t j = 0; j < k; ++j) {
          EXPECT_EQ(idx[r * k + j], want[j]) << cols << " k=" << k;
          EXPECT_EQ(v[r * k + j], x[r * cols + want[j]]);
        }
      }
    }
  }
}

TEST(RowOps, TopKRanksNaNLast) {
  const float x[] = {std::nanf(""), 1, -kInf, 2, std::nanf("")};
  for (int64_t k : {3, 5}) {
    float v[5];
    int32_t idx[5];
    topK(x, 1, 5, k, v, idx);
    EXPECT_EQ(idx[0], 3);
    EXPECT_EQ(idx[1], 1);
    EXPECT_EQ(idx[2], 2);
    if (k == 5) {
      EXPECT_EQ(idx[3], 0);
      EXPECT_EQ(idx[4], 4);
    }
  }
}

/// groupLimit by brute force: group scores sorted with stable_sort.
std::vector<float> groupLimitRef(const std::vector<float> &x, int64_t cols,
                                 int64_t nGroup, int64_t topkGroup) {
  const int64_t size = cols / nGroup;
  std::vector<float> y = x;
  for (size_t r = 0; r < x.size() / size_t(cols); ++r) {
    const float *row = &x[r * cols];
    std::vector<float> score(static_cast<size_t>(nGroup));
    for (int64_t g = 0; g < nGroup; ++g) {
      std::vector<float> v(row + g * size, row + (g + 1) * size);
      std::sort(v.begin(), v.end(), std::greater<float>());
      score[g] = size == 1 ? v[0] : v[0] + v[1];
    }
    std::vector<int32_t> order = ranking(score.data(), nGroup);
    for (int64_t j = topkGroup; j < nGroup; ++j)
      for (int64_t i = 0; i < size; ++i)
        y[r * cols + order[j] * size + i] = -kInf;
  }
  return y;
}

TEST(RowOps, GroupLimit) {
  std::mt19937 rng(3);
  struct Case {
    int64_t cols, nGroup, topkGroup;
  };
  for (Case c : {Case{16, 4, 2}, Case{256, 8, 4}, Case{12, 12, 3},
                 Case{8, 1, 1}, Case{32, 4, 4}}) {
    const int64_t rows = 9;
    std::vector<float> x = randomFloats(rng, rows * c.cols);
    // Equal group scores in row 0: groups 0 and 1 tie, lower index wins.
    for (int64_t i = 0; i < c.cols; ++i)
      x[i] = i < 2 * (c.cols / c.nGroup) ? 0.5f : 0.1f;
    std::vector<float> want = groupLimitRef(x, c.cols, c.nGroup, c.topkGroup);
    std::vector<float> y(x.size());
    groupLimit(x.data(), rows, c.cols, c.nGroup, c.topkGroup, y.data());
    EXPECT_TRUE(sameBits(y, want)) << c.cols << "/" << c.nGroup;
    groupLimit(x.data(), rows, c.cols, c.nGroup, c.topkGroup, x.data());
    EXPECT_TRUE(sameBits(x, want)) << "in place";
  }
}

TEST(RowOps, GatherAndNormalize) {
  std::mt19937 rng(4);
  const int64_t rows = 3, cols = 20, k = 5;
  std::vector<float> x = randomFloats(rng, rows * cols, 0, 1);
  std::vector<int32_t> idx(static_cast<size_t>(rows * k));
  for (size_t i = 0; i < idx.size(); ++i)
    idx[i] = int32_t((i * 7) % cols);
  std::vector<float> g(static_cast<size_t>(rows * k));
  gather(x.data(), rows, cols, idx.data(), k, g.data());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < k; ++j)
      EXPECT_EQ(g[r * k + j], x[r * cols + idx[r * k + j]]);

  std::vector<float> n(g.size());
  std::vector<double> want(g.size());
  for (int64_t r = 0; r < rows; ++r) {
    double s = 0;
    for (int64_t j = 0; j < k; ++j)
      s += g[r * k + j];
    for (int64_t j = 0; j < k; ++j)
      want[r * k + j] = g[r * k + j] / (s + 1e-20);
  }
  normalize(g.data(), rows, k, 1e-20f, n.data());
  EXPECT_LE(relL2(n.data(), want.data(), rows * k), 1e-6);
  const float zeros[3] = {0, 0, 0};
  float out[3];
  normalize(zeros, 1, 3, 1e-20f, out); // eps keeps 0/0 away
  EXPECT_EQ(out[0], 0.0f);
}

} // namespace
