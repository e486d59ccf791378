//===- ServerMetrics.h - Prometheus metrics and the busy log line -*- C++
//-*-===//
//
// GET /metrics in Prometheus text (../shared/SERVING.md R-MET-1..5; the names
// are vLLM's with the `kiln:` prefix, so dashboards port): the engine's gauges
// and counters, request counts by finish reason, speculative acceptance per
// draft position, and histograms of time to first token (from the request's
// arrival at the server), inter-token latency, end-to-end latency, queue time
// and prompt / generation lengths. `logLine` is the line kiln-serve prints
// every few seconds while busy.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TOOLS_KILN_SERVE_SERVERMETRICS_H
#define KILN_TOOLS_KILN_SERVE_SERVERMETRICS_H

#include "runtime/serve/EngineMetrics.h"
#include "runtime/serve/Request.h"

#include <mutex>
#include <string>
#include <vector>

namespace kiln::serve::api {

/// A Prometheus histogram: cumulative counts per upper bound, sum, count.
class Histogram {
public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double v);
  /// `name_bucket{model_name=..,le=..}`, `name_sum`, `name_count` lines.
  std::string text(const std::string &name, const std::string &labels) const;
  int64_t count() const { return count_; }

private:
  std::vector<double> bounds_;
  std::vector<int64_t> counts_; // per bucket, not cumulative; last is +Inf
  double sum_ = 0;
  int64_t count_ = 0;
};

class ServerMetrics {
public:
  explicit ServerMetrics(std::string modelName);

  /// A finished request; `ttftS` and `e2eS` are measured from its arrival at
  /// the server (negative `ttftS`: no token was generated).
  void observe(const RequestOutput &out, double ttftS, double e2eS);

  /// The whole /metrics page.
  std::string text(const EngineMetrics &m) const;

  /// One line on what happened since the last call (`seconds` ago), e.g.
  /// "running 12, waiting 3, KV 41.2%, prompt 812.0 tok/s, generation
  /// 240.5 tok/s, prefix hits 58.1%, accepted drafts 1.62/round".
  std::string logLine(const EngineMetrics &m, double seconds);

private:
  std::string model_;
  mutable std::mutex mutex_;
  Histogram ttft_, itl_, e2e_, queue_, promptLen_, genLen_;
  int64_t finishedStop_ = 0, finishedLength_ = 0, finishedAbort_ = 0,
          finishedError_ = 0;
  EngineMetrics last_; // at the previous log line
};

} // namespace kiln::serve::api

#endif // KILN_TOOLS_KILN_SERVE_SERVERMETRICS_H
