//===- Stats.h - What a load run measured -----------------------*- C++ -*-===//
//
// The aggregates of a run from its request records, defined as sglang's
// bench_serving defines them (../shared/SERVING.md 2.5 and R-BEN-3): TTFT,
// TPOT = (e2e - TTFT) / (completion_tokens - 1), ITL per chunk and per
// token, e2e latency (mean, median, std, p90, p95, p99, max, in ms), the
// throughputs over the run's duration, concurrency = sum of e2e / duration,
// the peak output tokens in a one-second bucket, and the cache hit rate =
// sum of cached / sum of prompt tokens. Printed as a table, or as JSON with
// sglang's field names.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TOOLS_KILN_LOADGEN_STATS_H
#define KILN_TOOLS_KILN_LOADGEN_STATS_H

#include "tools/kiln-loadgen/StreamClient.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <optional>
#include <string>
#include <vector>

namespace kiln::loadgen {

/// A sample's statistics (numpy's linear-interpolation percentiles).
struct Distribution {
  size_t n = 0;
  double mean = 0, median = 0, std = 0, p90 = 0, p95 = 0, p99 = 0, max = 0;
};

/// Each value `weights[i]` times (all once without weights).
Distribution distribution(std::vector<double> values,
                          const std::vector<int64_t> &weights = {});

struct RunSummary {
  double requestRate = 0;     // requests per second; infinity: all at once
  int64_t maxConcurrency = 0; // 0: no cap
  double durationS = 0;
  int64_t completed = 0, failed = 0;
  int64_t totalInput = 0, totalOutput = 0, totalCached = 0;
  double requestThroughput = 0, inputThroughput = 0, outputThroughput = 0,
         totalThroughput = 0, concurrency = 0, maxOutputTokensPerS = 0,
         cacheHitRatePct = 0;
  std::optional<double> acceptLength;             // from the server's /metrics
  Distribution ttft, tpot, itl, itlPerToken, e2e; // milliseconds
  std::vector<std::string> errors; // one per failed request, in send order
  std::vector<RequestRecord> records;
};

/// The aggregates over the successful requests of a run that took
/// `durationS` seconds.
RunSummary summarize(std::vector<RequestRecord> records, double durationS,
                     double requestRate, int64_t maxConcurrency);

/// sglang's field names; with `details`, the per-request lists too.
nlohmann::json toJson(const RunSummary &s, bool details);

/// A readable block of the numbers.
void printSummary(std::FILE *out, const RunSummary &s);

/// "inf" or the rate with up to three decimals.
std::string rateName(double rate);

} // namespace kiln::loadgen

#endif // KILN_TOOLS_KILN_LOADGEN_STATS_H
