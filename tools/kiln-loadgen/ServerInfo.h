//===- ServerInfo.h - What is asked around a run ----------------*- C++ -*-===//
//
// The calls outside the measured requests: the model id from /v1/models,
// the prefix-cache flush (sglang's /flush_cache, else vLLM's
// /reset_prefix_cache) and the speculative-decoding counters of /metrics
// (kiln:, vllm: or sglang: names), read before and after a run for the
// accept length. Servers without them are benchmarked all the same.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TOOLS_KILN_LOADGEN_SERVERINFO_H
#define KILN_TOOLS_KILN_LOADGEN_SERVERINFO_H

#include "tools/kiln-loadgen/StreamClient.h"

#include <optional>
#include <string>

namespace kiln::loadgen {

struct ModelInfo {
  std::string id;
  int64_t maxModelLen = 0; // 0: not reported
};

/// data[0] of GET /v1/models; `error` says why not.
std::optional<ModelInfo> discoverModel(const Target &t, std::string &error);

/// POST /flush_cache, then /reset_prefix_cache; the route that answered
/// 200, or nothing (`error` says what each answered).
std::optional<std::string> flushPrefixCache(const Target &t,
                                            std::string &error);

/// The counters of one /metrics scrape, summed over their label sets.
struct SpecCounters {
  double drafts = 0, accepted = 0;
  std::optional<double> acceptLengthGauge; // sglang:spec_accept_length
};

/// Nothing when /metrics is absent or has no speculative counters.
std::optional<SpecCounters> scrapeSpecCounters(const Target &t);

/// 1 + accepted / drafts over the run, when the server drafted in it.
std::optional<double> acceptLength(const std::optional<SpecCounters> &before,
                                   const std::optional<SpecCounters> &after);

/// The sum of the samples named `name` (any labels) in Prometheus text.
std::optional<double> metricSum(const std::string &text,
                                const std::string &name);

} // namespace kiln::loadgen

#endif // KILN_TOOLS_KILN_LOADGEN_SERVERINFO_H
