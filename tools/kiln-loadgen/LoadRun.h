//===- LoadRun.h - Open-loop load at one request rate -----------*- C++ -*-===//
//
// Sends a workload at Poisson arrivals (../shared/SERVING.md R-BEN-1): each
// request goes at its arrival time on a thread of its own, whatever the
// server's progress, unless a --max-concurrency cap holds it back (then the
// later ones queue in order, as behind sglang's semaphore). The run lasts
// from the first send to the end of the last stream.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TOOLS_KILN_LOADGEN_LOADRUN_H
#define KILN_TOOLS_KILN_LOADGEN_LOADRUN_H

#include "tools/kiln-loadgen/Stats.h"
#include "tools/kiln-loadgen/StreamClient.h"
#include "tools/kiln-loadgen/Workload.h"

#include <string>
#include <vector>

namespace kiln::loadgen {

struct RunOptions {
  Target target;
  std::string endpoint = "/v1/completions";
  std::string model;          // empty: no "model" field
  double requestRate = 0;     // infinity: all at once
  int64_t maxConcurrency = 0; // 0: no cap
  uint64_t seed = 1;
};

/// The body of one streamed completion: the prompt as token ids, greedy,
/// exactly `outputLen` tokens (ignore_eos), usage in the last chunk.
std::string requestBody(const std::string &model, const RequestSpec &r);

/// Runs `requests` at o.requestRate and sums them up (without the accept
/// length, which the caller reads from the server around the run).
RunSummary runLoad(const RunOptions &o,
                   const std::vector<RequestSpec> &requests);

/// `n` copies of `first` (at most 32 output tokens) at once, as sglang
/// warms up; their records.
std::vector<RequestRecord> warmUp(const RunOptions &o, RequestSpec first,
                                  int64_t n);

} // namespace kiln::loadgen

#endif // KILN_TOOLS_KILN_LOADGEN_LOADRUN_H
