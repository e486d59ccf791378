//===- StepEvents.h - What one engine step did, for the other ranks -*- C++
//-*-===//
//
// Under mpirun (an expert-parallel artifact) every rank holds an Engine of
// its own and every rank must make the same plan calls with the same rows,
// in lock-step: the collectives inside the plans pair them up. (Under
// data-parallel attention each request runs on one rank, `placedOn`, and
// the ranks' plan calls meet in Model::run instead.) Rank 0 owns
// the requests (the HTTP side); before each step it sends the other ranks
// what it did to its engine since the last one, and they do the same to
// theirs. The engine is deterministic (no clocks or randomness in its
// decisions; sampling is seeded per request), so equal events give equal
// schedules, pages and tokens on every rank.
//
// On the wire the events are one vector of int64 words (WireWords.h).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_SERVE_STEPEVENTS_H
#define KILN_RUNTIME_SERVE_STEPEVENTS_H

#include "runtime/serve/Request.h"
#include "support/Status.h"

#include <cstdint>
#include <vector>

namespace kiln::serve {

struct StepEvents {
  /// Requests submitted, in the order rank 0's engine took them (so their
  /// engine ids agree everywhere).
  std::vector<RequestParams> submitted;
  /// Engine ids cancelled (by their clients, or all of them at a shutdown
  /// without draining). Under data-parallel attention: loop ids.
  std::vector<RequestId> cancelled;
  /// Data-parallel attention (docs/parallel.md): the rank each submitted
  /// request runs on and its id in rank 0's loop, one per submitted
  /// request; empty otherwise.
  std::vector<int32_t> placedOn;
  std::vector<RequestId> loopIds;
  bool flushPrefixCache = false;
  /// Run one Engine::step after the above.
  bool step = false;
  /// Rank 0's loop has ended: the other ranks end theirs.
  bool stop = false;
};

std::vector<int64_t> encodeStepEvents(const StepEvents &events);
/// DataLoss naming what was cut short or out of range.
Result<StepEvents> decodeStepEvents(const std::vector<int64_t> &words);

} // namespace kiln::serve

#endif // KILN_RUNTIME_SERVE_STEPEVENTS_H
