//===- SpecSampling.cpp ---------------------------------------------------===//

#include "runtime/engine/SpecSampling.h"

#include <algorithm>

using namespace kiln::engine;

int32_t kiln::engine::argmaxRow(const float *row, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i)
    if (row[i] > row[best])
      best = i;
  return int32_t(best);
}

int32_t kiln::engine::sampleIndex(const float *weights, int64_t n,
                                  std::mt19937_64 &rng) {
  double total = 0;
  for (int64_t i = 0; i < n; ++i)
    total += std::max(0.0f, weights[i]);
  if (total <= 0)
    return argmaxRow(weights, n);
  double u = std::uniform_real_distribution<double>(0.0, total)(rng);
  double acc = 0;
  int64_t last = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (weights[i] <= 0)
      continue;
    acc += weights[i];
    last = i;
    if (u < acc)
      return int32_t(i);
  }
  return int32_t(last); // rounding at the top end
}

SpecRound kiln::engine::verifyGreedy(const int32_t *drafts, int k,
                                     const float *targetLogits, int64_t vocab) {
  SpecRound round;
  for (int i = 0; i < k; ++i) {
    int32_t best = argmaxRow(targetLogits + int64_t(i) * vocab, vocab);
    if (best != drafts[i]) {
      round.tokens.push_back(best);
      return round;
    }
    round.tokens.push_back(drafts[i]);
    ++round.accepted;
  }
  round.tokens.push_back(argmaxRow(targetLogits + int64_t(k) * vocab, vocab));
  return round;
}

SpecRound kiln::engine::verifySampled(const int32_t *drafts, int k,
                                      const float *p, const float *q,
                                      int64_t vocab, std::mt19937_64 &rng) {
  SpecRound round;
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  std::vector<float> residual(static_cast<size_t>(vocab));
  for (int i = 0; i < k; ++i) {
    const float *pi = p + int64_t(i) * vocab, *qi = q + int64_t(i) * vocab;
    int32_t x = drafts[i];
    double px = pi[x], qx = qi[x];
    // x was drawn from q, so qx > 0; accept with min(1, p/q).
    if (qx > 0 && uniform(rng) * qx < px) {
      round.tokens.push_back(x);
      ++round.accepted;
      continue;
    }
    for (int64_t v = 0; v < vocab; ++v)
      residual[v] = std::max(0.0f, pi[v] - qi[v]);
    round.tokens.push_back(sampleIndex(residual.data(), vocab, rng));
    return round;
  }
  round.tokens.push_back(sampleIndex(p + int64_t(k) * vocab, vocab, rng));
  return round;
}
