//===- Generator.h - Prefill, decode loop and perplexity --------*- C++ -*-===//
//
// generate(): prefill the prompt in chunks of at most `prefillChunk` tokens
// (positions continue across chunks; only the last chunk asks for logits,
// of its last row), sample the first token, then decode one token per step
// until maxNewTokens or a stop id.
//
// perplexity(): non-overlapping windows of `ctx` tokens (a trailing partial
// window is dropped; a text shorter than one window is one window), each a
// fresh sequence scored from position 0; NLL of tokens 1..n-1 given their
// prefix, log-softmax in double; ppl = exp(mean NLL over all windows).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_ENGINE_GENERATOR_H
#define KILN_RUNTIME_ENGINE_GENERATOR_H

#include "runtime/engine/Model.h"
#include "runtime/engine/Sampler.h"

#include <functional>
#include <vector>

namespace kiln::engine {

inline constexpr int64_t kDefaultPrefillChunk = 512;

/// Which logits prefill() hands back.
enum class PrefillLogits { None, Last, All };

/// Called with (row index into the tokens, logits [vocab]).
using LogitsRowFn = std::function<void(int64_t, const float *)>;

/// Feeds tokens[0, n) to sequence `seq` at positions start, start+1, ...
/// through the prefill plan, at most `chunk` tokens per run.
Status prefill(Model &model, int32_t seq, const int32_t *tokens, int64_t n,
               int64_t start, int64_t chunk, PrefillLogits which,
               const LogitsRowFn &onRow);

/// One decode step: `token` at `position` of `seq` (the decode plan, or the
/// prefill plan if the artifact has none); the logits [vocab] of that row.
Result<const float *> decodeStep(Model &model, int32_t seq, int32_t token,
                                 int64_t position);

struct GenerateOptions {
  int64_t maxNewTokens = 128;
  SamplingParams sampling;
  /// Keep generating through stop ids.
  bool ignoreEos = false;
  /// Ids that end generation (the stop id is kept in the output). Empty:
  /// the tokenizer's stop set, else config.eos_token_ids.
  std::vector<int32_t> stopIds;
  int64_t prefillChunk = kDefaultPrefillChunk;
  /// Copy the logits of the last prompt position into the result.
  bool keepPromptLogits = false;
  /// Called with each generated token; returning false stops generation.
  std::function<bool(int32_t)> onToken;
};

struct GenerateStats {
  int64_t promptTokens = 0;
  int64_t generatedTokens = 0;
  double ttftS = 0;    // start to first sampled token (includes prefill)
  double prefillS = 0; // prefill runs
  double decodeS = 0;  // decode steps after the first token
  double prefillTokPerS = 0;
  double decodeTokPerS = 0; // decode steps / decodeS
};

enum class StopReason { Length, StopToken, Callback };

struct GenerateResult {
  std::vector<int32_t> tokens;
  std::vector<float> promptLogits; // [vocab] with keepPromptLogits
  GenerateStats stats;
  StopReason stop = StopReason::Length;
};

/// Generates after `prompt` on a fresh sequence of `model`.
Result<GenerateResult> generate(Model &model,
                                const std::vector<int32_t> &prompt,
                                const GenerateOptions &options);

/// -log softmax(logits)[target], computed in double.
double tokenNll(const float *logits, int64_t vocab, int32_t target);

struct PerplexityResult {
  double ppl = 0;
  double meanNll = 0;
  int64_t tokens = 0; // predicted tokens (NLL terms)
  int64_t windows = 0;
};

/// Scores one window: calls onRow(i, logits) for rows i = 0..n-2, row i
/// being the logits after window[0..i].
using WindowScorer = std::function<Status(const int32_t *window, int64_t n,
                                          const LogitsRowFn &onRow)>;

/// The windowing and NLL math of perplexity(), over any scorer.
Result<PerplexityResult> perplexityOver(const std::vector<int32_t> &tokens,
                                        int64_t ctx, int64_t vocab,
                                        const WindowScorer &score);

/// Perplexity of `tokens` under `model` with windows of `ctx` tokens.
Result<PerplexityResult> perplexity(Model &model,
                                    const std::vector<int32_t> &tokens,
                                    int64_t ctx,
                                    int64_t chunk = kDefaultPrefillChunk);

} // namespace kiln::engine

#endif // KILN_RUNTIME_ENGINE_GENERATOR_H
