//===- Sampler.cpp - Choosing the next token from logits ------------------===//

#include "runtime/engine/Sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace kiln::engine {

Status SamplingParams::check() const {
  if (!std::isfinite(temperature))
    return makeError(StatusCode::InvalidArgument, "temperature ", temperature,
                     ", expected a finite number (<= 0 for greedy)");
  if (topK < 0)
    return makeError(StatusCode::InvalidArgument, "top-k ", topK,
                     ", expected >= 0 (0 = off)");
  if (!(topP > 0.0f && topP <= 1.0f))
    return makeError(StatusCode::InvalidArgument, "top-p ", topP,
                     ", expected a value in (0, 1] (1 = off)");
  return Status::ok();
}

Sampler::Sampler(SamplingParams params) : params_(params), rng_(params.seed) {}

int32_t Sampler::argmax(const float *logits, int64_t vocab) {
  int64_t best = -1;
  for (int64_t i = 0; i < vocab; ++i) {
    if (std::isnan(logits[i]))
      continue;
    if (best < 0 || logits[i] > logits[best])
      best = i;
  }
  return int32_t(best < 0 ? 0 : best);
}

double Sampler::uniform() { return double(rng_() >> 11) * 0x1.0p-53; }

void Sampler::distribution(const float *logits, int64_t vocab,
                           std::vector<float> &probs) const {
  probs.assign(size_t(vocab), 0.0f);
  if (vocab <= 0)
    return;
  if (params_.greedy()) {
    probs[argmax(logits, vocab)] = 1.0f;
    return;
  }
  const double invT = 1.0 / double(params_.temperature);
  const double ninf = -std::numeric_limits<double>::infinity();
  p_.resize(size_t(vocab));
  double maxZ = ninf;
  for (int64_t i = 0; i < vocab; ++i) {
    double z = std::isnan(logits[i]) ? ninf : double(logits[i]) * invT;
    p_[i] = z;
    maxZ = std::max(maxZ, z);
  }
  if (maxZ == ninf) { // nothing finite: fall back to greedy
    probs[argmax(logits, vocab)] = 1.0f;
    return;
  }

  ids_.clear();
  for (int64_t i = 0; i < vocab; ++i)
    if (p_[i] > ninf)
      ids_.push_back(int32_t(i));
  auto byScore = [&](int32_t a, int32_t b) {
    return p_[a] > p_[b] || (p_[a] == p_[b] && a < b);
  };
  if (params_.topK > 0 && size_t(params_.topK) < ids_.size()) {
    std::nth_element(ids_.begin(), ids_.begin() + (params_.topK - 1),
                     ids_.end(), byScore);
    ids_.resize(size_t(params_.topK));
  }

  // Softmax over the kept set (the maximum is always kept). +inf logits
  // share the mass equally.
  double sum = 0.0;
  for (int32_t i : ids_) {
    double w = maxZ == std::numeric_limits<double>::infinity()
                   ? (p_[i] == maxZ ? 1.0 : 0.0)
                   : std::exp(p_[i] - maxZ);
    p_[i] = w;
    sum += w;
  }
  if (params_.topP < 1.0f) {
    std::sort(ids_.begin(), ids_.end(), byScore);
    const double target = double(params_.topP) * sum;
    double cum = 0.0;
    size_t keep = 0;
    while (keep < ids_.size()) {
      cum += p_[ids_[keep++]];
      if (cum >= target)
        break;
    }
    ids_.resize(keep);
    sum = cum;
  }
  for (int32_t i : ids_)
    probs[i] = float(p_[i] / sum);
}

int32_t Sampler::draw(const float *probs, int64_t vocab) {
  double total = 0.0;
  for (int64_t i = 0; i < vocab; ++i)
    if (probs[i] > 0.0f)
      total += probs[i];
  if (!(total > 0.0))
    return argmax(probs, vocab);
  const double u = uniform() * total;
  double cum = 0.0;
  int64_t last = 0;
  for (int64_t i = 0; i < vocab; ++i) {
    if (!(probs[i] > 0.0f))
      continue;
    cum += probs[i];
    last = i;
    if (u < cum)
      return int32_t(i);
  }
  return int32_t(last);
}

int32_t Sampler::sample(const float *logits, int64_t vocab,
                        std::vector<float> *probs) {
  if (params_.greedy()) {
    int32_t id = argmax(logits, vocab);
    if (probs) {
      probs->assign(size_t(vocab), 0.0f);
      if (vocab > 0)
        (*probs)[id] = 1.0f;
    }
    return id;
  }
  std::vector<float> &p = probs ? *probs : scratch_;
  distribution(logits, vocab, p);
  return draw(p.data(), vocab);
}

} // namespace kiln::engine
