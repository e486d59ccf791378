//===- RouterTest.cpp - noaux_tc routing vs a double reference ------------===//
//
// The reference follows GLM.md §3.2 step by step in double. Expert ids must
// match exactly (random inputs keep selections away from ties); weights
// within rel L2 1e-6.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/Router.h"
#include "runtime/cpu/Matmul.h"
#include "test/unit/cpu/CpuTestUtil.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <numeric>

using namespace kiln::cpu;
using namespace kiln::cpu::test;

namespace {

void routeRef(const std::vector<float> &logits, int64_t T,
              const std::vector<float> &bias, const MoeParams &p,
              std::vector<int32_t> &ids, std::vector<double> &weights) {
  const int64_t e = p.numExperts, size = e / p.nGroup;
  ids.assign(size_t(T * p.topK), -1);
  weights.assign(size_t(T * p.topK), 0);
  for (int64_t t = 0; t < T; ++t) {
    std::vector<double> s(static_cast<size_t>(e)), sel(static_cast<size_t>(e));
    for (int64_t i = 0; i < e; ++i) {
      s[i] = 1.0 / (1.0 + std::exp(-double(logits[t * e + i])));
      sel[i] = s[i] + bias[i];
    }
    // Group filter: keep the topkGroup groups with the best top-2 sums.
    std::vector<double> score(static_cast<size_t>(p.nGroup));
    for (int64_t g = 0; g < p.nGroup; ++g) {
      std::vector<double> v(sel.begin() + g * size,
                            sel.begin() + (g + 1) * size);
      std::sort(v.rbegin(), v.rend());
      score[g] = size == 1 ? v[0] : v[0] + v[1];
    }
    std::vector<int64_t> groups(static_cast<size_t>(p.nGroup));
    std::iota(groups.begin(), groups.end(), 0);
    std::stable_sort(groups.begin(), groups.end(),
                     [&](int64_t a, int64_t b) { return score[a] > score[b]; });
    for (int64_t j = p.topkGroup; j < p.nGroup; ++j)
      for (int64_t i = 0; i < size; ++i)
        sel[groups[j] * size + i] = -std::numeric_limits<double>::infinity();
    std::vector<int64_t> order(static_cast<size_t>(e));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int64_t a, int64_t b) { return sel[a] > sel[b]; });
    double sum = 0;
    for (int64_t j = 0; j < p.topK; ++j) {
      ids[t * p.topK + j] = int32_t(order[j]);
      weights[t * p.topK + j] = s[order[j]]; // unbiased
      sum += s[order[j]];
    }
    for (int64_t j = 0; j < p.topK; ++j) {
      double &w = weights[t * p.topK + j];
      if (p.normTopkProb)
        w /= sum + 1e-20;
      w *= p.routedScalingFactor;
    }
  }
}

void checkRouting(const MoeParams &p, int64_t T, uint32_t seed) {
  std::mt19937 rng(seed);
  const int64_t e = p.numExperts;
  std::vector<float> logits = randomFloats(rng, T * e, -4, 4);
  // A bias big enough to change selections, as trained biases do.
  std::vector<float> bias = randomFloats(rng, e, -0.3f, 0.3f);
  std::vector<int32_t> ids(static_cast<size_t>(T * p.topK)), wantIds;
  std::vector<float> w(static_cast<size_t>(T * p.topK)),
      work(static_cast<size_t>(2 * e));
  std::vector<double> wantW;
  routeFromLogits(logits.data(), T, bias.data(), p, work.data(), ids.data(),
                  w.data());
  routeRef(logits, T, bias, p, wantIds, wantW);
  EXPECT_EQ(ids, wantIds) << "E=" << e << " topK=" << p.topK;
  EXPECT_LE(relL2(w.data(), wantW.data(), T * p.topK), 1e-6);
}

TEST(Router, Glm5Shape) {
  MoeParams p;
  p.numExperts = 256;
  p.topK = 8;
  p.routedScalingFactor = 2.5f;
  checkRouting(p, 17, 1);
  p.normTopkProb = false;
  checkRouting(p, 17, 2);
}

TEST(Router, GroupedTopK1To8) {
  MoeParams p;
  p.numExperts = 16;
  p.nGroup = 4;
  p.topkGroup = 2;
  p.routedScalingFactor = 1.5f;
  for (int64_t k = 1; k <= 8; ++k) {
    p.topK = k;
    checkRouting(p, 23, uint32_t(10 + k));
  }
}

TEST(Router, GroupFilterExcludesExperts) {
  // Expert 0 has the best score, but its group's top-2 sum loses.
  MoeParams p;
  p.numExperts = 8;
  p.nGroup = 4;
  p.topkGroup = 1;
  p.topK = 2;
  const float logits[8] = {5, -5, 2, 2, 0, 0, 0, 0};
  const float bias[8] = {};
  float work[16], w[2];
  int32_t ids[2];
  routeFromLogits(logits, 1, bias, p, work, ids, w);
  EXPECT_EQ(ids[0], 2);
  EXPECT_EQ(ids[1], 3); // tie with 2 in s, lower id first
  EXPECT_FLOAT_EQ(w[0], 0.5f);
}

TEST(Router, BiasSelectsButDoesNotWeigh) {
  MoeParams p;
  p.numExperts = 4;
  p.topK = 1;
  p.normTopkProb = false;
  const float logits[4] = {1, 0, 0, 0};
  const float bias[4] = {0, 0, 0.9f, 0};
  float work[8], w;
  int32_t id;
  routeFromLogits(logits, 1, bias, p, work, &id, &w);
  EXPECT_EQ(id, 2);
  EXPECT_FLOAT_EQ(w, 0.5f); // sigmoid(0), not 0.5 + 0.9
}

TEST(Router, RouteUsesMatmulLogits) {
  std::mt19937 rng(5);
  MoeParams p;
  p.numExperts = 16;
  p.topK = 4;
  p.nGroup = 4;
  p.topkGroup = 2;
  const int64_t T = 6, H = 96;
  TestWeight router = randomWeight(rng, WeightFormat::BF16, 16, H);
  std::vector<float> x = randomFloats(rng, T * H), bias = randomFloats(rng, 16);
  ThreadPool pool(2);
  Arena arena;
  std::vector<int32_t> ids(static_cast<size_t>(T * 4)),
      wantIds(static_cast<size_t>(T * 4));
  std::vector<float> w(static_cast<size_t>(T * 4)),
      wantW(static_cast<size_t>(T * 4)), logits(T * 16);
  route(pool, x.data(), T, router.view, bias.data(), p, arena, ids.data(),
        w.data());
  matmul(pool, x.data(), T, router.view, logits.data());
  std::vector<float> work(32);
  routeFromLogits(logits.data(), T, bias.data(), p, work.data(), wantIds.data(),
                  wantW.data());
  EXPECT_EQ(ids, wantIds);
  EXPECT_TRUE(sameBits(w, wantW));
}

} // namespace
