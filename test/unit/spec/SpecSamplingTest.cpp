//===- SpecSamplingTest.cpp - Speculative verification rules --------------===//
//
// The statistical tests use fixed seeds and a chi-square goodness-of-fit
// test at significance level alpha = 0.001: with N draws the statistic
// sum (observed - N p)^2 / (N p) over the support of p must stay below the
// chi-square critical value for (support - 1) degrees of freedom.
//
//===----------------------------------------------------------------------===//

#include "runtime/engine/SpecSampling.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>

using namespace kiln::engine;

namespace {

// Chi-square critical values at alpha = 0.001 by degrees of freedom.
double chi2Critical001(int df) {
  static const std::map<int, double> table = {
      {1, 10.83},  {2, 13.82},  {3, 16.27}, {4, 18.47}, {5, 20.52},
      {6, 22.46},  {7, 24.32},  {8, 26.12}, {9, 27.88}, {10, 29.59},
      {11, 31.26}, {12, 32.91}, {15, 37.70}};
  return table.at(df);
}

std::vector<float> normalized(std::vector<float> w) {
  double s = 0;
  for (float x : w)
    s += x;
  for (float &x : w)
    x = float(x / s);
  return w;
}

/// Draws from q, verifies against p (k = 1), returns the chi-square
/// statistic of the emitted first token against p.
double chiSquareOfOneRound(const std::vector<float> &p,
                           const std::vector<float> &q, int n, uint64_t seed,
                           int &df) {
  int64_t v = int64_t(p.size());
  std::mt19937_64 rng(seed);
  std::vector<int> counts(size_t(v), 0);
  // p for position 2 (the bonus) is irrelevant to the first token.
  std::vector<float> p2(p);
  p2.insert(p2.end(), p.begin(), p.end());
  for (int i = 0; i < n; ++i) {
    int32_t draft = sampleIndex(q.data(), v, rng);
    SpecRound r = verifySampled(&draft, 1, p2.data(), q.data(), v, rng);
    ++counts[size_t(r.tokens[0])];
  }
  double chi2 = 0;
  df = -1;
  for (int64_t t = 0; t < v; ++t) {
    double expected = double(n) * p[t];
    if (expected == 0) {
      EXPECT_EQ(counts[t], 0) << "token " << t << " has probability 0";
      continue;
    }
    chi2 += (counts[t] - expected) * (counts[t] - expected) / expected;
    ++df;
  }
  return chi2;
}

} // namespace

TEST(SpecGreedy, AcceptsLongestAgreeingPrefix) {
  const int64_t v = 4;
  // Target argmax per position: 2, 1, 3, 0.
  std::vector<float> logits = {0,      1, 5,      2, /**/ 0, 9,
                               1,      1, /**/ 1, 2, 3,      8,
                               /**/ 7, 1, 1,      1};
  int32_t all[3] = {2, 1, 3};
  SpecRound r = verifyGreedy(all, 3, logits.data(), v);
  EXPECT_EQ(r.accepted, 3);
  EXPECT_EQ(r.tokens, (std::vector<int32_t>{2, 1, 3, 0}));
  int32_t miss[3] = {2, 0, 3};
  r = verifyGreedy(miss, 3, logits.data(), v);
  EXPECT_EQ(r.accepted, 1);
  EXPECT_EQ(r.tokens, (std::vector<int32_t>{2, 1}));
  int32_t first[3] = {0, 1, 3};
  r = verifyGreedy(first, 3, logits.data(), v);
  EXPECT_EQ(r.accepted, 0);
  EXPECT_EQ(r.tokens, (std::vector<int32_t>{2}));
}

TEST(SpecGreedy, TiesGoToLowerIndex) {
  std::vector<float> logits = {3, 3, 1, /**/ 0, 0, 0};
  int32_t d[1] = {1};
  SpecRound r = verifyGreedy(d, 1, logits.data(), 3);
  EXPECT_EQ(r.accepted, 0);
  EXPECT_EQ(r.tokens, (std::vector<int32_t>{0}));
}

// Output distribution equals the target's at temperature 1: draft and
// target disagree strongly, including tokens the draft never proposes.
TEST(SpecSampled, FirstTokenDistributionEqualsTarget) {
  std::vector<float> p =
      normalized({0.30f, 0.05f, 0.20f, 0.01f, 0.14f, 0.10f, 0.15f, 0.05f});
  std::vector<float> q =
      normalized({0.05f, 0.40f, 0.05f, 0.20f, 0.0f, 0.10f, 0.10f, 0.10f});
  int df;
  double chi2 = chiSquareOfOneRound(p, q, 200000, 1234, df);
  EXPECT_LT(chi2, chi2Critical001(df)) << "df " << df;
}

// With top-p applied to both (zeros in p and in q), still exact.
TEST(SpecSampled, DistributionEqualsTargetWithTopP) {
  // Target after top-p 0.8: tokens 3 and 6 removed; draft after its own
  // top-p: tokens 0 and 7 removed.
  std::vector<float> p =
      normalized({0.35f, 0.20f, 0.15f, 0.0f, 0.15f, 0.15f, 0.0f, 0.0f});
  std::vector<float> q =
      normalized({0.0f, 0.30f, 0.10f, 0.30f, 0.10f, 0.10f, 0.10f, 0.0f});
  int df;
  double chi2 = chiSquareOfOneRound(p, q, 200000, 99, df);
  EXPECT_LT(chi2, chi2Critical001(df)) << "df " << df;
}

// The test has power: a sampler that always accepts the draft gives the
// draft's distribution, which the same statistic rejects.
TEST(SpecSampled, ChiSquareDetectsAWrongSampler) {
  std::vector<float> p =
      normalized({0.30f, 0.05f, 0.20f, 0.01f, 0.14f, 0.10f, 0.15f, 0.05f});
  std::vector<float> q =
      normalized({0.05f, 0.40f, 0.05f, 0.20f, 0.0f, 0.10f, 0.10f, 0.10f});
  std::mt19937_64 rng(5);
  std::vector<int> counts(8, 0);
  const int n = 200000;
  for (int i = 0; i < n; ++i)
    ++counts[size_t(sampleIndex(q.data(), 8, rng))];
  double chi2 = 0;
  for (int t = 0; t < 8; ++t) {
    double e = n * p[t];
    chi2 += (counts[t] - e) * (counts[t] - e) / e;
  }
  EXPECT_GT(chi2, chi2Critical001(7));
}

TEST(SpecSampled, IdenticalDistributionsAcceptEverything) {
  std::vector<float> p = normalized({1, 2, 3, 4});
  std::vector<float> pp(p);
  pp.insert(pp.end(), p.begin(), p.end());
  pp.insert(pp.end(), p.begin(), p.end());
  std::mt19937_64 rng(3);
  for (int i = 0; i < 1000; ++i) {
    int32_t d[2] = {sampleIndex(p.data(), 4, rng),
                    sampleIndex(p.data(), 4, rng)};
    SpecRound r = verifySampled(d, 2, pp.data(), pp.data(), 4, rng);
    ASSERT_EQ(r.accepted, 2);
    ASSERT_EQ(r.tokens.size(), 3u);
  }
}
