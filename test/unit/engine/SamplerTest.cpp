//===- SamplerTest.cpp - Greedy, temperature, top-k, top-p, seeds ---------===//

#include "runtime/engine/Sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace kiln::engine {
namespace {

SamplingParams params(float t, int64_t k = 0, float p = 1.0f,
                      uint64_t seed = 0) {
  SamplingParams s;
  s.temperature = t;
  s.topK = k;
  s.topP = p;
  s.seed = seed;
  return s;
}

TEST(SamplerTest, GreedyTiesGoToTheLowerId) {
  std::vector<float> logits = {1, 3, 3, 2};
  EXPECT_EQ(Sampler::argmax(logits.data(), 4), 1);
  Sampler s;
  std::vector<float> probs;
  EXPECT_EQ(s.sample(logits.data(), 4, &probs), 1);
  EXPECT_EQ(probs, (std::vector<float>{0, 1, 0, 0}));
}

TEST(SamplerTest, GreedySkipsNaN) {
  float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> logits = {nan, -1, nan, -0.5f};
  EXPECT_EQ(Sampler::argmax(logits.data(), 4), 3);
}

TEST(SamplerTest, TemperatureZeroIsGreedy) {
  std::vector<float> logits = {0.1f, 2.0f, 1.9f, -3.0f, 2.0f};
  for (uint64_t seed : {0u, 1u, 99u}) {
    Sampler s(params(0.0f, 2, 0.5f, seed));
    for (int i = 0; i < 20; ++i)
      EXPECT_EQ(s.sample(logits.data(), 5), 1);
  }
}

TEST(SamplerTest, TemperatureScalesTheSoftmax) {
  std::vector<float> logits = {0, 1, 2};
  Sampler s(params(2.0f));
  std::vector<float> p;
  s.distribution(logits.data(), 3, p);
  double z = 1 + std::exp(0.5) + std::exp(1.0);
  EXPECT_NEAR(p[0], 1 / z, 1e-6);
  EXPECT_NEAR(p[1], std::exp(0.5) / z, 1e-6);
  EXPECT_NEAR(p[2], std::exp(1.0) / z, 1e-6);
}

TEST(SamplerTest, TopKKeepsTheKLargestWithTiesToLowerIds) {
  std::vector<float> logits = {1, 5, 3, 5, 3, 0};
  Sampler s(params(1.0f, 3));
  std::vector<float> p;
  s.distribution(logits.data(), 6, p);
  // Kept: 1, 3 (the 5s) and 2 (the lower-id 3).
  double z = 2 * std::exp(5.0) + std::exp(3.0);
  EXPECT_EQ(p[0], 0.0f);
  EXPECT_NEAR(p[1], std::exp(5.0) / z, 1e-6);
  EXPECT_NEAR(p[2], std::exp(3.0) / z, 1e-6);
  EXPECT_NEAR(p[3], std::exp(5.0) / z, 1e-6);
  EXPECT_EQ(p[4], 0.0f);
  EXPECT_EQ(p[5], 0.0f);
}

TEST(SamplerTest, TopPKeepsTheSmallestSetReachingTheMass) {
  std::vector<float> logits = {std::log(0.15f), std::log(0.5f), std::log(0.05f),
                               std::log(0.3f)};
  std::vector<float> p;
  Sampler(params(1.0f, 0, 0.79f)).distribution(logits.data(), 4, p);
  EXPECT_NEAR(p[1], 0.5 / 0.8, 1e-6);
  EXPECT_NEAR(p[3], 0.3 / 0.8, 1e-6);
  EXPECT_EQ(p[0], 0.0f);
  EXPECT_EQ(p[2], 0.0f);
  Sampler(params(1.0f, 0, 0.81f)).distribution(logits.data(), 4, p);
  EXPECT_NEAR(p[0], 0.15 / 0.95, 1e-6);
  EXPECT_EQ(p[2], 0.0f);
  // A tiny top-p keeps exactly the best token.
  Sampler(params(1.0f, 0, 1e-6f)).distribution(logits.data(), 4, p);
  EXPECT_EQ(p, (std::vector<float>{0, 1, 0, 0}));
}

TEST(SamplerTest, TopKThenTopP) {
  std::vector<float> logits = {std::log(0.4f), std::log(0.3f), std::log(0.2f),
                               std::log(0.1f)};
  std::vector<float> p;
  // top-k 3 renormalizes to 4/9, 3/9, 2/9; top-p 0.7 then needs 0 and 1.
  Sampler(params(1.0f, 3, 0.7f)).distribution(logits.data(), 4, p);
  EXPECT_NEAR(p[0], 4.0 / 7, 1e-6);
  EXPECT_NEAR(p[1], 3.0 / 7, 1e-6);
  EXPECT_EQ(p[2], 0.0f);
  EXPECT_EQ(p[3], 0.0f);
}

TEST(SamplerTest, SeedsReproduce) {
  std::vector<float> logits = {0.3f, 0.1f, 0.0f, 0.2f, -0.1f, 0.05f};
  auto draws = [&](uint64_t seed) {
    Sampler s(params(1.0f, 0, 1.0f, seed));
    std::vector<int32_t> out;
    for (int i = 0; i < 200; ++i)
      out.push_back(s.sample(logits.data(), 6));
    return out;
  };
  EXPECT_EQ(draws(7), draws(7));
  EXPECT_NE(draws(7), draws(8));
  // The generator is the standard's mt19937_64: its 10000th output is fixed.
  std::mt19937_64 rng(5489u);
  rng.discard(9999);
  EXPECT_EQ(rng(), 9981545732273789042ull);
}

TEST(SamplerTest, DrawsFollowTheDistribution) {
  std::vector<float> logits = {std::log(0.1f), std::log(0.6f), std::log(0.3f)};
  Sampler s(params(1.0f, 0, 1.0f, 42));
  std::vector<int> counts(3);
  const int n = 30000;
  for (int i = 0; i < n; ++i)
    ++counts[s.sample(logits.data(), 3)];
  double expect[] = {0.1, 0.6, 0.3};
  for (int i = 0; i < 3; ++i) {
    double sd = std::sqrt(n * expect[i] * (1 - expect[i]));
    EXPECT_NEAR(counts[i], n * expect[i], 5 * sd) << "token " << i;
  }
}

TEST(SamplerTest, ProbabilitiesMatchWhatIsDrawn) {
  std::vector<float> logits = {2, 1, 0, -1, 3};
  Sampler a(params(0.7f, 4, 0.9f, 3)), b(params(0.7f, 4, 0.9f, 3));
  for (int i = 0; i < 50; ++i) {
    std::vector<float> p;
    int32_t id = a.sample(logits.data(), 5, &p);
    EXPECT_GT(p[id], 0.0f);
    EXPECT_EQ(b.draw(p.data(), 5), id);
  }
}

TEST(SamplerTest, InfiniteAndNanLogits) {
  float inf = std::numeric_limits<float>::infinity();
  float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> logits = {-inf, inf, nan, inf};
  std::vector<float> p;
  Sampler(params(1.0f)).distribution(logits.data(), 4, p);
  EXPECT_EQ(p, (std::vector<float>{0, 0.5f, 0, 0.5f}));
  std::vector<float> none = {-inf, nan};
  Sampler(params(1.0f)).distribution(none.data(), 2, p);
  EXPECT_EQ(p, (std::vector<float>{1, 0}));
}

TEST(SamplerTest, CheckRejectsBadParams) {
  EXPECT_TRUE(params(0.8f, 40, 0.95f).check().isOk());
  EXPECT_FALSE(params(NAN).check().isOk());
  EXPECT_FALSE(params(1.0f, -1).check().isOk());
  EXPECT_FALSE(params(1.0f, 0, 0.0f).check().isOk());
  EXPECT_FALSE(params(1.0f, 0, 1.5f).check().isOk());
}

} // namespace
} // namespace kiln::engine
