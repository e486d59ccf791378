//===- Sampler.h - Choosing the next token from logits ----------*- C++ -*-===//
//
// Greedy (temperature <= 0): the argmax, ties to the lower id, NaN ranks
// lowest. Otherwise, in this order: logits / temperature; keep the top-k
// (k > 0; ties to the lower id); softmax in double over what is kept; keep
// the smallest set of most probable tokens whose mass reaches top-p (ties
// to the lower id); renormalize; draw by inverse CDF over ascending ids.
//
// Randomness: std::mt19937_64 seeded with `seed`; one draw per sampled
// token, u = (rng() >> 11) * 2^-53 in [0, 1). Both are fully specified by
// the C++ standard, so a seed gives the same tokens on every platform.
//
// distribution() returns the exact distribution sample() draws from
// (one-hot for greedy), which speculative rejection sampling needs.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_ENGINE_SAMPLER_H
#define KILN_RUNTIME_ENGINE_SAMPLER_H

#include "support/Status.h"

#include <cstdint>
#include <random>
#include <vector>

namespace kiln::engine {

struct SamplingParams {
  float temperature = 0.0f; // <= 0: greedy
  int64_t topK = 0;         // 0: off
  float topP = 1.0f;        // 1: off
  uint64_t seed = 0;

  bool greedy() const { return !(temperature > 0.0f); }
  /// InvalidArgument for a NaN/infinite temperature, negative top-k or
  /// top-p outside (0, 1].
  Status check() const;
};

class Sampler {
public:
  explicit Sampler(SamplingParams params = {});

  const SamplingParams &params() const { return params_; }

  /// The next token. With `probs`, also the distribution it was drawn from
  /// ([vocab], zeros outside the kept set).
  int32_t sample(const float *logits, int64_t vocab,
                 std::vector<float> *probs = nullptr);

  /// The distribution sample() draws from, without drawing.
  void distribution(const float *logits, int64_t vocab,
                    std::vector<float> &probs) const;

  /// Draws from `probs` [vocab] (not necessarily normalized) by inverse
  /// CDF over ascending ids; the argmax if the mass is not positive.
  int32_t draw(const float *probs, int64_t vocab);

  /// The next uniform number in [0, 1).
  double uniform();

  /// Largest logit, ties to the lower id, NaN lowest; 0 if vocab is 0.
  static int32_t argmax(const float *logits, int64_t vocab);

private:
  SamplingParams params_;
  std::mt19937_64 rng_;
  // Scratch for distribution().
  mutable std::vector<int32_t> ids_;
  mutable std::vector<double> p_;
  std::vector<float> scratch_;
};

} // namespace kiln::engine

#endif // KILN_RUNTIME_ENGINE_SAMPLER_H
