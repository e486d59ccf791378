//===- SpecDecoder.h - Speculative decoding with the MTP head ---*- C++ -*-===//
//
// Generation where the artifact's draft plan (the MTP layer) proposes k
// tokens per round and one target forward over k+1 positions verifies them
// (SpecSampling.h has the acceptance rules).
//
// MTP alignment (DeepSeek-V3 / sglang / vLLM convention): draft row i pairs
// the target's final-normed hidden h_i with the next token x_{i+1}, at
// position i, in the draft's own caches. After a round the draft caches keep
// only rows computed from real target hiddens; rows from chained draft steps
// are rolled back and recomputed from the verify pass's hiddens (the
// "catch-up" at the start of the next round). Target caches are rolled back
// past the rejected tokens.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_ENGINE_SPECDECODER_H
#define KILN_RUNTIME_ENGINE_SPECDECODER_H

#include "runtime/engine/Generator.h"
#include "runtime/engine/Model.h"
#include "runtime/engine/Sampler.h"

#include <functional>
#include <vector>

namespace kiln::engine {

struct SpecStats {
  int64_t rounds = 0;
  int64_t draftedTokens = 0;
  int64_t acceptedTokens = 0;
  /// Per draft position i: rounds that drafted position i, and rounds whose
  /// draft i was accepted.
  std::vector<int64_t> reached, accepted;
  double meanAccepted() const {
    return rounds ? double(acceptedTokens) / double(rounds) : 0.0;
  }
  std::vector<double> acceptRateByPosition() const;
};

struct SpecOptions {
  int k = 3;                 // drafts per round (>= 1)
  int64_t maxNewTokens = 64; // generated tokens
  int64_t prefillChunk = 512;
  bool stopAtEos = true;
  std::vector<int32_t> stopIds;
};

struct SpecResult {
  std::vector<int32_t> ids; // generated
  SpecStats stats;
  double ttftSeconds = 0, prefillSeconds = 0, decodeSeconds = 0;
  std::vector<float> lastPromptLogits; // [vocab]
};

/// Generates from `prompt` in sequence `seq` (empty caches). `onToken` is
/// called for each emitted token in order.
Result<SpecResult>
generateSpeculative(Model &model, int32_t seq,
                    const std::vector<int32_t> &prompt,
                    const SamplingParams &sampling, const SpecOptions &options,
                    const std::function<void(int32_t)> &onToken = {});

/// generate() with speculation: same options and result (a fresh sequence,
/// stop ids, streaming callback, prompt logits), plus the round statistics.
Result<GenerateResult> generateSpeculative(Model &model,
                                           const std::vector<int32_t> &prompt,
                                           const GenerateOptions &options,
                                           int k, SpecStats *stats);

} // namespace kiln::engine

#endif // KILN_RUNTIME_ENGINE_SPECDECODER_H
