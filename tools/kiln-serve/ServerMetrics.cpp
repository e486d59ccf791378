//===- ServerMetrics.cpp --------------------------------------------------===//

#include "tools/kiln-serve/ServerMetrics.h"

#include <cstdio>
#include <sstream>

using namespace kiln::serve;
using namespace kiln::serve::api;

namespace {

// vLLM's buckets (vllm/v1/metrics/loggers.py), so that dashboards' quantile
// queries read the same.
const std::vector<double> kTtftBuckets = {
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,  0.25,  0.5,   0.75,
    1.0,   2.5,   5.0,  7.5,  10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0};
const std::vector<double> kItlBuckets = {
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2,  0.3,  0.4, 0.5,
    0.75, 1.0,   2.5,  5.0,   7.5, 10.0, 20.0, 40.0, 80.0};
const std::vector<double> kLatencyBuckets = {
    0.3,  0.5,  0.8,  1.0,  1.5,   2.0,   2.5,   5.0,   10.0,   15.0,  20.0,
    30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};
const std::vector<double> kLengthBuckets = {
    1,    2,    5,    10,    20,    50,    100,    200,   500,
    1000, 2000, 5000, 10000, 20000, 50000, 100000, 200000};

std::string number(double v) {
  std::ostringstream os;
  os.precision(10);
  os << v;
  return os.str();
}

} // namespace

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double v) {
  size_t b = 0;
  while (b < bounds_.size() && v > bounds_[b])
    ++b;
  ++counts_[b];
  sum_ += v;
  ++count_;
}

std::string Histogram::text(const std::string &name,
                            const std::string &labels) const {
  std::ostringstream os;
  int64_t cumulative = 0;
  for (size_t b = 0; b <= bounds_.size(); ++b) {
    cumulative += counts_[b];
    os << name << "_bucket{" << labels << ",le=\""
       << (b < bounds_.size() ? number(bounds_[b]) : "+Inf") << "\"} "
       << cumulative << "\n";
  }
  os << name << "_sum{" << labels << "} " << number(sum_) << "\n"
     << name << "_count{" << labels << "} " << count_ << "\n";
  return os.str();
}

ServerMetrics::ServerMetrics(std::string modelName)
    : model_(std::move(modelName)), ttft_(kTtftBuckets), itl_(kItlBuckets),
      e2e_(kLatencyBuckets), queue_(kLatencyBuckets),
      promptLen_(kLengthBuckets), genLen_(kLengthBuckets) {}

void ServerMetrics::observe(const RequestOutput &out, double ttftS,
                            double e2eS) {
  std::lock_guard<std::mutex> lock(mutex_);
  switch (out.finish) {
  case FinishReason::Stop:
    ++finishedStop_;
    break;
  case FinishReason::Length:
    ++finishedLength_;
    break;
  case FinishReason::Cancelled:
    ++finishedAbort_;
    break;
  case FinishReason::Error:
    ++finishedError_;
    break;
  }
  if (ttftS >= 0)
    ttft_.observe(ttftS);
  for (double s : out.interTokenS)
    itl_.observe(s);
  e2e_.observe(e2eS);
  queue_.observe(out.queueS);
  promptLen_.observe(double(out.prompt.size()));
  genLen_.observe(double(out.ids.size()));
}

std::string ServerMetrics::text(const EngineMetrics &m) const {
  const std::string labels = "model_name=\"" + model_ + "\"";
  std::ostringstream os;
  auto head = [&](const char *name, const char *type, const char *help) {
    os << "# HELP kiln:" << name << " " << help << "\n# TYPE kiln:" << name
       << " " << type << "\n";
  };
  auto put = [&](const char *name, const char *type, const char *help,
                 double v) {
    head(name, type, help);
    os << "kiln:" << name << "{" << labels << "} " << number(v) << "\n";
  };
  put("num_requests_running", "gauge", "Requests in the running batch.",
      double(m.running));
  put("num_requests_waiting", "gauge", "Requests waiting to be admitted.",
      double(m.waiting));
  put("kv_cache_usage_perc", "gauge",
      "Fraction of KV pages held by running requests (evictable pages count "
      "as free).",
      m.pagesTotal ? double(m.pagesUsed) / double(m.pagesTotal) : 0.0);
  put("kv_cache_pages_total", "gauge", "KV pages in the pool.",
      double(m.pagesTotal));
  put("kv_cache_pages_free", "gauge", "KV pages free.", double(m.pagesFree));
  put("kv_cache_pages_evictable", "gauge",
      "KV pages held only by the prefix cache.", double(m.pagesEvictable));
  put("prompt_tokens_total", "counter", "Prompt tokens submitted.",
      double(m.promptTokens));
  put("generation_tokens_total", "counter", "Tokens generated.",
      double(m.generatedTokens));
  put("prefix_cache_queries_total", "counter",
      "Prompt tokens looked up in the prefix cache.",
      double(m.prefixQueriedTokens));
  put("prefix_cache_hits_total", "counter",
      "Prompt tokens found in the prefix cache.", double(m.prefixHitTokens));
  put("num_preemptions_total", "counter", "Requests preempted.",
      double(m.preemptions));
  put("request_refused_total", "counter", "Requests refused at submission.",
      double(m.requestsRefused));
  put("spec_decode_num_drafts_total", "counter", "Speculative rounds.",
      double(m.specRounds));
  put("spec_decode_num_draft_tokens_total", "counter", "Drafted tokens.",
      double(m.specDrafted));
  put("spec_decode_num_accepted_tokens_total", "counter",
      "Accepted drafted tokens.", double(m.specAccepted));
  head("spec_decode_num_accepted_tokens_per_pos_total", "counter",
       "Accepted drafted tokens by draft position.");
  for (size_t i = 0; i < m.specAcceptedAt.size(); ++i)
    os << "kiln:spec_decode_num_accepted_tokens_per_pos_total{" << labels
       << ",position=\"" << i << "\"} " << m.specAcceptedAt[i] << "\n";

  std::lock_guard<std::mutex> lock(mutex_);
  head("request_success_total", "counter", "Requests finished, by reason.");
  const std::pair<const char *, int64_t> reasons[] = {
      {"stop", finishedStop_},
      {"length", finishedLength_},
      {"abort", finishedAbort_},
      {"error", finishedError_}};
  for (const auto &[reason, n] : reasons)
    os << "kiln:request_success_total{" << labels << ",finished_reason=\""
       << reason << "\"} " << n << "\n";
  auto hist = [&](const char *name, const char *help, const Histogram &h) {
    head(name, "histogram", help);
    os << h.text(std::string("kiln:") + name, labels);
  };
  hist("time_to_first_token_seconds",
       "Time from arrival at the server to the first token.", ttft_);
  hist("inter_token_latency_seconds", "Time between consecutive tokens.", itl_);
  hist("e2e_request_latency_seconds",
       "Time from arrival at the server to the last token.", e2e_);
  hist("request_queue_time_seconds", "Time from submission to first admission.",
       queue_);
  hist("request_prompt_tokens", "Prompt lengths of finished requests.",
       promptLen_);
  hist("request_generation_tokens", "Generated lengths of finished requests.",
       genLen_);
  return os.str();
}

std::string ServerMetrics::logLine(const EngineMetrics &m, double seconds) {
  std::lock_guard<std::mutex> lock(mutex_);
  const EngineMetrics &l = last_;
  const double s = seconds > 0 ? seconds : 1;
  const int64_t queried = m.prefixQueriedTokens - l.prefixQueriedTokens,
                rounds = m.specRounds - l.specRounds;
  char line[320];
  std::snprintf(
      line, sizeof line,
      "running %lld, waiting %lld, KV %.1f%%, prompt %.1f tok/s, generation "
      "%.1f tok/s, prefix hits %.1f%%, accepted drafts %.2f/round",
      (long long)m.running, (long long)m.waiting,
      m.pagesTotal ? 100.0 * double(m.pagesUsed) / double(m.pagesTotal) : 0.0,
      double(m.promptTokens - l.promptTokens) / s,
      double(m.generatedTokens - l.generatedTokens) / s,
      queried ? 100.0 * double(m.prefixHitTokens - l.prefixHitTokens) /
                    double(queried)
              : 0.0,
      rounds ? double(m.specAccepted - l.specAccepted) / double(rounds) : 0.0);
  last_ = m;
  return line;
}
