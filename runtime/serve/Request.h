//===- Request.h - What a caller asks of the engine and gets back -*- C++
//-*-===//

#ifndef KILN_RUNTIME_SERVE_REQUEST_H
#define KILN_RUNTIME_SERVE_REQUEST_H

#include "runtime/engine/Sampler.h"

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::serve {

using RequestId = int64_t;

struct RequestParams {
  /// The caller's label, echoed in the output.
  std::string id;
  std::vector<int32_t> prompt;
  /// Generated tokens at most (>= 1).
  int64_t maxTokens = 128;
  engine::SamplingParams sampling;
  /// Ids that end generation (kept in the output). Empty: the tokenizer's
  /// stop set, else config.eos_token_ids.
  std::vector<int32_t> stopIds;
  /// Keep generating through stop ids.
  bool ignoreEos = false;
  /// Texts that end generation; the output text stops before the first.
  std::vector<std::string> stopStrings;
  /// Copy the logits of the last prompt position into the output.
  bool returnPromptLogits = false;
  /// >= 0: record each generated token's log-probability and this many most
  /// likely alternatives (OpenAI `logprobs` / `top_logprobs`).
  int32_t logprobs = -1;
};

/// The log-probability of a generated token under the model's distribution
/// at its position (log-softmax of the raw logits: before temperature,
/// top-k and top-p), with the `RequestParams::logprobs` most likely tokens,
/// most likely first (ties: the lower id).
struct TokenLogprob {
  float logprob = 0;
  std::vector<std::pair<int32_t, float>> top;
};

enum class FinishReason { Stop, Length, Cancelled, Error };

inline const char *finishReasonName(FinishReason r) {
  switch (r) {
  case FinishReason::Stop:
    return "stop";
  case FinishReason::Length:
    return "length";
  case FinishReason::Cancelled:
    return "cancelled";
  case FinishReason::Error:
    return "error";
  }
  return "?";
}

struct RequestOutput {
  RequestId request = -1;
  std::string id;
  std::vector<int32_t> prompt;
  std::vector<int32_t> ids; // generated
  std::string text;         // decoded ids without a final stop id, cut
                            // at a stop string; empty without a tokenizer
  FinishReason finish = FinishReason::Length;
  std::string error; // FinishReason::Error
  /// Prompt tokens found in the prefix cache at first admission.
  int64_t cachedTokens = 0;
  int64_t preemptions = 0;
  double queueS = 0; // submission to first admission
  double ttftS = 0;  // submission to first token
  double e2eS = 0;   // submission to finish
  /// Seconds between consecutive generated tokens (a speculative round
  /// emits several at once: the first gets the round's time, the others 0).
  std::vector<double> interTokenS;
  /// Speculative decoding: per draft position, rounds that reached it and
  /// rounds whose draft there was accepted.
  std::vector<int64_t> specReached, specAccepted;
  std::vector<float> promptLogits;    // [vocab] with returnPromptLogits
  std::vector<TokenLogprob> logprobs; // one per id, with logprobs >= 0
};

} // namespace kiln::serve

#endif // KILN_RUNTIME_SERVE_REQUEST_H
