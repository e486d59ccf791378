//===- Workload.cpp - The requests a load run sends -----------------------===//
//
// Only the engine, std::mt19937_64, is taken from the library: its output
// is fixed by the standard, whereas the distributions and std::shuffle are
// not, so the draws below are written out.
//
//===----------------------------------------------------------------------===//

#include "tools/kiln-loadgen/Workload.h"

#include <algorithm>
#include <cmath>
#include <random>

using namespace kiln::loadgen;

namespace {

/// An integer in [0, n) (the modulo bias is below 2^-40 for the n used).
uint64_t below(std::mt19937_64 &rng, uint64_t n) { return rng() % n; }

/// A double in [0, 1).
double unit(std::mt19937_64 &rng) { return double(rng() >> 11) * 0x1.0p-53; }

std::vector<int32_t> randomIds(std::mt19937_64 &rng, int64_t n,
                               const WorkloadOptions &o) {
  std::vector<int32_t> ids(static_cast<size_t>(n));
  const uint64_t span = uint64_t(o.tokenHi - o.tokenLo);
  for (int32_t &id : ids)
    id = int32_t(o.tokenLo + int64_t(below(rng, span)));
  return ids;
}

/// sglang's random lengths: uniform in [max(1, floor(L*r)), L].
int64_t sampleLen(std::mt19937_64 &rng, int64_t len, double ratio) {
  int64_t lo = std::max<int64_t>(1, int64_t(std::floor(double(len) * ratio)));
  if (lo >= len)
    return len;
  return lo + int64_t(below(rng, uint64_t(len - lo + 1)));
}

} // namespace

bool kiln::loadgen::applyPreset(const std::string &name, WorkloadOptions &o) {
  // ../shared/SERVING.md R-BEN-2: 60% of the input shared, scaled to a
  // 2,048-token context, or the full 20k-in / 1k-out shape.
  if (name == "reference-scaled") {
    o.prefixLen = 750, o.suffixLen = 500, o.outputLen = 64;
  } else if (name == "reference") {
    o.prefixLen = 12000, o.suffixLen = 8000, o.outputLen = 1000;
  } else {
    return false;
  }
  o.dataset = Dataset::SharedPrefix;
  return true;
}

std::vector<RequestSpec>
kiln::loadgen::buildWorkload(const WorkloadOptions &o) {
  std::mt19937_64 rng(o.seed);
  std::vector<RequestSpec> out;
  if (o.dataset == Dataset::Random) {
    for (int64_t i = 0; i < o.numPrompts; ++i) {
      RequestSpec r;
      int64_t in = sampleLen(rng, o.randomInputLen, o.randomRangeRatio);
      r.outputLen = sampleLen(rng, o.randomOutputLen, o.randomRangeRatio);
      r.prompt = randomIds(rng, in, o);
      out.push_back(std::move(r));
    }
    return out;
  }
  for (int64_t g = 0; g < o.groups; ++g) {
    std::vector<int32_t> prefix = randomIds(rng, o.prefixLen, o);
    for (int64_t q = 0; q < o.promptsPerGroup; ++q) {
      RequestSpec r;
      r.prompt = prefix;
      std::vector<int32_t> suffix = randomIds(rng, o.suffixLen, o);
      r.prompt.insert(r.prompt.end(), suffix.begin(), suffix.end());
      r.outputLen = o.outputLen;
      r.group = g;
      out.push_back(std::move(r));
    }
  }
  // Fisher-Yates, so the groups interleave.
  for (size_t i = out.size(); i > 1; --i)
    std::swap(out[i - 1], out[size_t(below(rng, i))]);
  return out;
}

std::vector<double> kiln::loadgen::poissonArrivals(int64_t n, double rate,
                                                   uint64_t seed) {
  std::vector<double> t(size_t(std::max<int64_t>(n, 0)), 0.0);
  if (std::isinf(rate))
    return t;
  // A stream of its own, so the arrivals do not depend on the dataset.
  std::mt19937_64 rng(seed ^ 0x9e3779b97f4a7c15ull);
  // The first request goes at 0, each later one an exponential gap after
  // the one before (as sglang's and vLLM's clients do).
  for (size_t i = 1; i < t.size(); ++i)
    t[i] = t[i - 1] - std::log1p(-unit(rng)) / rate;
  return t;
}
