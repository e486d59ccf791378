//===- Workload.h - The requests a load run sends ---------------*- C++ -*-===//
//
// Datasets of token-id prompts with exact lengths: `random` (independent
// prompts) and `shared-prefix` (G groups, each a shared prefix of P tokens
// followed by Q unique suffixes of S tokens, shuffled so the groups
// interleave, as sglang's generated-shared-prefix dataset does), the
// presets of ../shared/SERVING.md R-BEN-2, and the Poisson arrival times.
// Everything is drawn from std::mt19937_64 with the user's seed, by rules
// that do not depend on the C++ library, so a run repeats anywhere.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TOOLS_KILN_LOADGEN_WORKLOAD_H
#define KILN_TOOLS_KILN_LOADGEN_WORKLOAD_H

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::loadgen {

enum class Dataset { Random, SharedPrefix };

struct WorkloadOptions {
  Dataset dataset = Dataset::SharedPrefix;
  // random
  int64_t numPrompts = 64;
  int64_t randomInputLen = 1024, randomOutputLen = 128;
  double randomRangeRatio = 1.0; // lengths uniform in [max(1, L*r), L]
  // shared-prefix
  int64_t groups = 4, promptsPerGroup = 8;
  int64_t prefixLen = 750, suffixLen = 500, outputLen = 64;
  // token ids are drawn uniformly in [tokenLo, tokenHi)
  int64_t tokenLo = 100, tokenHi = 2048;
  uint64_t seed = 1;
};

/// One request: its prompt ids, the tokens to generate, and its group
/// (-1 in the random dataset).
struct RequestSpec {
  std::vector<int32_t> prompt;
  int64_t outputLen = 0;
  int64_t group = -1;
};

/// Applies a named preset ("reference-scaled", "reference") to the
/// shared-prefix lengths; false for an unknown name.
bool applyPreset(const std::string &name, WorkloadOptions &o);

/// The requests in the order they are sent.
std::vector<RequestSpec> buildWorkload(const WorkloadOptions &o);

/// Send times in seconds from the start for `n` requests at `rate` requests
/// per second (exponential gaps; all zero when rate is infinite).
std::vector<double> poissonArrivals(int64_t n, double rate, uint64_t seed);

} // namespace kiln::loadgen

#endif // KILN_TOOLS_KILN_LOADGEN_WORKLOAD_H
