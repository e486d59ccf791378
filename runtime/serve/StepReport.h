//===- StepReport.h - What a data-parallel rank's turn produced -*- C++ -*-===//
//
// Serving a data-parallel-attention artifact under mpirun (docs/parallel.md):
// each request runs on the engine of one rank, and after every turn each
// rank sends rank 0, which answers the clients, the tokens its requests
// generated and the requests that finished, by rank 0's loop ids. On the
// wire a report is int64 words (WireWords.h).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_SERVE_STEPREPORT_H
#define KILN_RUNTIME_SERVE_STEPREPORT_H

#include "runtime/serve/EngineMetrics.h"
#include "runtime/serve/Request.h"
#include "support/Status.h"

#include <cstdint>
#include <vector>

namespace kiln::serve {

struct StepReport {
  struct Token {
    RequestId loop = -1;
    int32_t token = 0;
    bool hasLogprob = false;
    TokenLogprob logprob;
  };
  /// In the order the engine emitted them.
  std::vector<Token> tokens;
  /// RequestOutput::request holds the loop id.
  std::vector<RequestOutput> finished;
  /// The rank's engine still has requests running or waiting.
  bool hasWork = false;
  /// Its engine's counters and gauges after the turn.
  EngineMetrics metrics;
};

/// `into` plus `from`, field by field (the node's figures from its ranks'),
/// except `steps`, which stays `into`'s (the ranks step together).
void addMetrics(EngineMetrics &into, const EngineMetrics &from);

std::vector<int64_t> encodeStepReport(const StepReport &report);
/// DataLoss naming what was cut short or out of range.
Result<StepReport> decodeStepReport(const std::vector<int64_t> &words);

} // namespace kiln::serve

#endif // KILN_RUNTIME_SERVE_STEPREPORT_H
