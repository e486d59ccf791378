//===- SpecDistributionTest.cpp - Sampled speculation keeps p -------------===//
//
// On the compiled GLM fixture (KILN_TEST_ARTIFACT), sampling with
// speculation (k = 2) must draw the token after the first generated one from
// the target's own distribution. For each of N seeds we generate 2 tokens;
// among the runs whose first token is the most frequent one, the second
// token is compared with the exact target distribution p(. | prompt, t1)
// (one non-speculative forward) by a chi-square goodness-of-fit test at
// alpha = 0.001 (bins with expected count < 5 are pooled). Temperature 1,
// with and without top-p 0.9.
//
//===----------------------------------------------------------------------===//

#include "runtime/engine/Generator.h"
#include "runtime/engine/Model.h"
#include "runtime/engine/Sampler.h"
#include "runtime/engine/SpecDecoder.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <map>

using namespace kiln;
using namespace kiln::engine;

namespace {

const char *artifactPath() { return std::getenv("KILN_TEST_ARTIFACT"); }

/// The target's processed next-token distribution after `ids`.
std::vector<float> targetDistribution(Model &model,
                                      const std::vector<int32_t> &ids,
                                      const SamplingParams &params) {
  auto seq = model.openSequence();
  EXPECT_TRUE(seq.isOk());
  std::vector<int32_t> seqs(ids.size(), *seq), pos(ids.size());
  for (size_t i = 0; i < ids.size(); ++i)
    pos[i] = int32_t(i);
  int32_t last = int32_t(ids.size() - 1);
  PlanInputs in;
  in.tokenIds = ids.data();
  in.seqIds = seqs.data();
  in.positions = pos.data();
  in.tokens = int64_t(ids.size());
  in.logitRows = &last;
  in.logitCount = 1;
  auto out = model.run(kPrefillPlan, in);
  EXPECT_TRUE(out.isOk());
  std::vector<float> probs;
  Sampler(params).distribution(out->logits, out->vocab, probs);
  model.closeSequence(*seq);
  return probs;
}

// Chi-square critical values at alpha = 0.001.
double chi2Critical(int df) {
  // Wilson-Hilferty approximation, accurate to < 1% for df >= 3.
  const double z = 3.0902; // upper 0.001 normal quantile
  double a = 2.0 / (9.0 * df);
  return df * std::pow(1 - a + z * std::sqrt(a), 3);
}

void checkSecondToken(float topP) {
  const char *path = artifactPath();
  if (!path)
    GTEST_SKIP() << "KILN_TEST_ARTIFACT is not set";
  LoadOptions lo;
  lo.threads = 1;
  auto loaded = Model::load(path, lo);
  ASSERT_TRUE(loaded.isOk()) << loaded.status().toString();
  Model &model = **loaded;
  SamplingParams params;
  params.temperature = 1.0f;
  params.topP = topP;
  // A context whose next token is likely enough (p >= 0.6) that most runs
  // share their first token: grow a code prompt by its greedy continuation.
  auto encoded = model.tokenizer()->encode(
      "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.", true);
  ASSERT_TRUE(encoded.isOk());
  std::vector<int32_t> prompt = *encoded;
  for (int step = 0; step < 64; ++step) {
    std::vector<float> p0 = targetDistribution(model, prompt, params);
    int32_t top = Sampler::argmax(p0.data(), int64_t(p0.size()));
    if (p0[top] >= 0.6f)
      break;
    prompt.push_back(top);
  }
  const int n = 1500;
  std::map<int32_t, std::vector<int32_t>> secondByFirst;
  for (int s = 0; s < n; ++s) {
    params.seed = uint64_t(s) + 1;
    GenerateOptions g;
    g.maxNewTokens = 2;
    g.sampling = params;
    g.ignoreEos = true;
    SpecStats stats;
    auto r = generateSpeculative(model, prompt, g, 2, &stats);
    ASSERT_TRUE(r.isOk()) << r.status().toString();
    ASSERT_EQ(r->tokens.size(), 2u);
    secondByFirst[r->tokens[0]].push_back(r->tokens[1]);
  }
  int32_t first = -1;
  size_t best = 0;
  for (auto &[t, v] : secondByFirst)
    if (v.size() > best) {
      best = v.size();
      first = t;
    }
  ASSERT_GT(best, 200u) << "the prompt's first token is too spread out";
  std::vector<int32_t> ids = prompt;
  ids.push_back(first);
  std::vector<float> p = targetDistribution(model, ids, params);
  std::map<int32_t, int> counts;
  for (int32_t t : secondByFirst[first])
    ++counts[t];
  // Pool bins with expected count < 5 into one.
  double m = double(best), chi2 = 0, pooledE = 0, pooledO = 0;
  int bins = 0;
  for (size_t t = 0; t < p.size(); ++t) {
    double e = m * p[t];
    double o = counts.count(int32_t(t)) ? counts[int32_t(t)] : 0;
    if (e == 0) {
      EXPECT_EQ(o, 0) << "token " << t << " has probability 0";
      continue;
    }
    if (e < 5) {
      pooledE += e;
      pooledO += o;
      continue;
    }
    chi2 += (o - e) * (o - e) / e;
    ++bins;
  }
  if (pooledE > 0) {
    chi2 += (pooledO - pooledE) * (pooledO - pooledE) / pooledE;
    ++bins;
  }
  ASSERT_GE(bins, 3);
  EXPECT_LT(chi2, chi2Critical(bins - 1))
      << bins << " bins, " << best << " samples";
}

} // namespace

TEST(SpecDistribution, TemperatureOne) { checkSecondToken(1.0f); }
TEST(SpecDistribution, TopP) { checkSecondToken(0.9f); }
