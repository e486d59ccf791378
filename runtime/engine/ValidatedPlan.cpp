//===- ValidatedPlan.cpp - What a validated plan answers about itself -----===//
//
// The checks every device makes on a call's inputs before it runs. The
// validation itself is PlanValidator.cpp.
//
//===----------------------------------------------------------------------===//

#include "runtime/engine/ValidatedPlan.h"

#include "runtime/cpu/attention/PagedKvCache.h"

#include <algorithm>
#include <climits>
#include <unordered_map>

namespace kiln::engine {

int64_t ValidatedPlan::hiddenSize() const {
  if (hiddenOut_ >= 0)
    return buffers_[hiddenOut_].rowElems;
  if (hiddenIn_ >= 0)
    return buffers_[hiddenIn_].rowElems;
  return 0;
}

Status ValidatedPlan::checkInputs(const PlanInputs &in, int64_t maxPositions,
                                  const CacheRows &rows, std::string_view where,
                                  std::string_view limitReason) const {
  auto bad = [&](const auto &...args) {
    return makeError(StatusCode::InvalidArgument, "plan '", name_, "'", where,
                     ": ", args...);
  };
  if (in.tokens < 1 || in.tokens > kMaxPlanTokens)
    return bad(in.tokens, " tokens, expected 1 to ", kMaxPlanTokens);
  if (in.logitCount < 0 || in.logitCount > kMaxPlanTokens)
    return bad(in.logitCount, " logit rows, expected 0 to ", kMaxPlanTokens);
  if (!in.tokenIds || !in.seqIds || !in.positions ||
      (in.logitCount > 0 && !in.logitRows))
    return bad("token_ids, seq_ids, positions and logit_rows are required");
  if (hiddenIn_ >= 0 && !in.hiddenIn)
    return bad("needs hidden_in [", in.tokens, ", ",
               buffers_[hiddenIn_].rowElems, "]");
  for (int64_t t = 0; t < in.tokens; ++t) {
    if (tokenLimit_ > 0 &&
        (in.tokenIds[t] < 0 || in.tokenIds[t] >= tokenLimit_))
      return bad("token_ids[", t, "] = ", in.tokenIds[t], ", expected 0 to ",
                 tokenLimit_ - 1);
    if (in.seqIds[t] < 0 || in.seqIds[t] >= cpu::PagedKvCache::kMaxSequences)
      return bad("seq_ids[", t, "] = ", in.seqIds[t], ", expected 0 to ",
                 cpu::PagedKvCache::kMaxSequences - 1);
    if (in.positions[t] < 0 ||
        (maxPositions > 0 && in.positions[t] >= maxPositions))
      return bad("positions[", t, "] = ", in.positions[t], ", expected 0 to ",
                 maxPositions > 0 ? maxPositions - 1 : int64_t(INT32_MAX),
                 limitReason);
  }
  for (int64_t r = 0; r < in.logitCount; ++r)
    if (in.logitRows[r] < 0 || in.logitRows[r] >= in.tokens)
      return bad("logit_rows[", r, "] = ", in.logitRows[r], ", expected 0 to ",
                 in.tokens - 1);
  // Positions continue each sequence: a token may not skip past what the
  // caches hold (plus the earlier tokens of its sequence in this call), or
  // attention would read rows never written.
  if (!appended_.empty()) {
    std::unordered_map<int32_t, int64_t> next;
    for (int64_t t = 0; t < in.tokens; ++t) {
      int32_t seq = in.seqIds[t];
      auto it = next.find(seq);
      int64_t limit = it == next.end() ? rows(appended_[0], seq) : it->second;
      if (in.positions[t] > limit)
        return bad("positions[", t, "] = ", in.positions[t], " for sequence ",
                   seq, " skips past its length ", limit,
                   " (positions must continue the sequence)");
      next[seq] = std::max<int64_t>(limit, in.positions[t] + 1);
    }
  }
  return Status::ok();
}

} // namespace kiln::engine
