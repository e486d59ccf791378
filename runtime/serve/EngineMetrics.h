//===- EngineMetrics.h - Counters and gauges of the serving engine -*- C++
//-*-===//
//
// Read between steps (the server of issue 16 exports them). Counters only
// grow; gauges are as of the end of the last step.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_SERVE_ENGINEMETRICS_H
#define KILN_RUNTIME_SERVE_ENGINEMETRICS_H

#include <cstdint>
#include <vector>

namespace kiln::serve {

struct EngineMetrics {
  // Gauges.
  int64_t running = 0;
  int64_t waiting = 0;
  int64_t pagesTotal = 0;
  int64_t pagesUsed = 0;
  int64_t pagesEvictable = 0;
  int64_t pagesFree = 0;
  // Counters.
  int64_t steps = 0;
  int64_t requestsSubmitted = 0;
  int64_t requestsRefused = 0;
  int64_t requestsFinished = 0;
  int64_t promptTokens = 0;    // submitted prompt tokens
  int64_t generatedTokens = 0; // emitted tokens
  int64_t computedTokens = 0;  // rows run through the target plans
  int64_t prefixQueriedTokens = 0;
  int64_t prefixHitTokens = 0;
  int64_t evictedPages = 0;
  int64_t preemptions = 0;
  int64_t specRounds = 0;
  int64_t specDrafted = 0;
  int64_t specAccepted = 0;
  /// Per draft position: rounds that reached it, rounds that accepted it.
  std::vector<int64_t> specReachedAt, specAcceptedAt;
  /// Wall seconds in the draft plan's calls (chained drafts and catch-up)
  /// and in the target calls that verified drafts: with specRounds, what a
  /// round costs in plan calls (kiln-bench --spec predicts from them).
  double specDraftS = 0;
  int64_t specDraftCalls = 0;
  double specVerifyS = 0;
};

} // namespace kiln::serve

#endif // KILN_RUNTIME_SERVE_ENGINEMETRICS_H
