//===- Stats.cpp - What a load run measured -------------------------------===//
//
// Tokens per chunk: servers stream text, not token counts. When every
// content chunk carried a cumulative usage, the counts are exact; otherwise
// the first chunk holds the first token and the other completion tokens are
// spread evenly over the later chunks, which keeps per-token ITL and the
// one-second peak consistent with TPOT when a server (or MTP) sends several
// tokens in one chunk.
//
//===----------------------------------------------------------------------===//

#include "tools/kiln-loadgen/Stats.h"

#include <algorithm>
#include <cmath>
#include <map>

using namespace kiln::loadgen;
using nlohmann::json;

Distribution kiln::loadgen::distribution(std::vector<double> values,
                                         const std::vector<int64_t> &weights) {
  Distribution d;
  if (!weights.empty()) {
    std::vector<double> expanded;
    for (size_t i = 0; i < values.size(); ++i)
      expanded.insert(expanded.end(), size_t(std::max<int64_t>(weights[i], 0)),
                      values[i]);
    values = std::move(expanded);
  }
  d.n = values.size();
  if (values.empty())
    return d;
  std::sort(values.begin(), values.end());
  double sum = 0, sq = 0;
  for (double v : values)
    sum += v;
  d.mean = sum / double(d.n);
  for (double v : values)
    sq += (v - d.mean) * (v - d.mean);
  d.std = std::sqrt(sq / double(d.n));
  auto at = [&](double p) {
    double rank = p / 100.0 * double(d.n - 1);
    size_t lo = size_t(std::floor(rank));
    size_t hi = std::min(lo + 1, d.n - 1);
    return values[lo] + (rank - double(lo)) * (values[hi] - values[lo]);
  };
  d.median = at(50), d.p90 = at(90), d.p95 = at(95), d.p99 = at(99);
  d.max = values.back();
  return d;
}

namespace {

/// Tokens in each content chunk of a successful record (see the top).
std::vector<double> tokensPerChunk(const RequestRecord &r) {
  const size_t k = r.chunkS.size();
  std::vector<double> n(k, 1.0);
  if (r.chunkTokens.size() == k) {
    for (size_t i = 0; i < k; ++i)
      n[i] = double(r.chunkTokens[i]);
  } else if (k == 1) {
    n[0] = double(r.completionTokens);
  } else if (k > 1) {
    double later =
        double(std::max<int64_t>(r.completionTokens - 1, 0)) / double(k - 1);
    std::fill(n.begin() + 1, n.end(), later);
  }
  return n;
}

} // namespace

RunSummary kiln::loadgen::summarize(std::vector<RequestRecord> records,
                                    double durationS, double requestRate,
                                    int64_t maxConcurrency) {
  RunSummary s;
  s.requestRate = requestRate;
  s.maxConcurrency = maxConcurrency;
  s.durationS = durationS;
  std::vector<double> ttft, tpot, itl, itlToken, e2e;
  std::vector<int64_t> itlTokenWeight;
  std::map<int64_t, double> perSecond; // output tokens by whole second
  double e2eSum = 0;
  for (const RequestRecord &r : records) {
    if (!r.ok) {
      ++s.failed;
      s.errors.push_back(r.error);
      continue;
    }
    ++s.completed;
    s.totalInput += r.promptTokens;
    s.totalOutput += r.completionTokens;
    s.totalCached += r.cachedTokens;
    ttft.push_back(r.ttftS * 1e3);
    e2e.push_back(r.e2eS * 1e3);
    e2eSum += r.e2eS;
    if (r.completionTokens > 1)
      tpot.push_back((r.e2eS - r.ttftS) / double(r.completionTokens - 1) * 1e3);
    std::vector<double> n = tokensPerChunk(r);
    for (size_t i = 0; i < r.chunkS.size(); ++i) {
      perSecond[int64_t(std::floor(r.sendS + r.chunkS[i]))] += n[i];
      if (i == 0)
        continue;
      double gap = (r.chunkS[i] - r.chunkS[i - 1]) * 1e3;
      itl.push_back(gap);
      if (n[i] > 0) {
        itlToken.push_back(gap / n[i]);
        itlTokenWeight.push_back(std::max<int64_t>(1, std::llround(n[i])));
      }
    }
    if (r.chunkS.empty())
      perSecond[int64_t(std::floor(r.sendS + r.e2eS))] +=
          double(r.completionTokens);
  }
  s.ttft = distribution(ttft);
  s.tpot = distribution(tpot);
  s.itl = distribution(itl);
  s.itlPerToken = distribution(itlToken, itlTokenWeight);
  s.e2e = distribution(e2e);
  if (durationS > 0) {
    s.requestThroughput = double(s.completed) / durationS;
    s.inputThroughput = double(s.totalInput) / durationS;
    s.outputThroughput = double(s.totalOutput) / durationS;
    s.totalThroughput = double(s.totalInput + s.totalOutput) / durationS;
    s.concurrency = e2eSum / durationS;
  }
  for (const auto &[second, tokens] : perSecond)
    s.maxOutputTokensPerS = std::max(s.maxOutputTokensPerS, tokens);
  if (s.totalInput > 0)
    s.cacheHitRatePct = 100.0 * double(s.totalCached) / double(s.totalInput);
  s.records = std::move(records);
  return s;
}

std::string kiln::loadgen::rateName(double rate) {
  if (std::isinf(rate))
    return "inf";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", rate);
  std::string s = buf;
  s.erase(s.find_last_not_of('0') + 1);
  if (s.back() == '.')
    s.pop_back();
  return s;
}

json kiln::loadgen::toJson(const RunSummary &s, bool details) {
  json j;
  // JSON has no infinity: the rate is the string "inf" then, as vLLM
  // writes it.
  j["request_rate"] =
      std::isinf(s.requestRate) ? json("inf") : json(s.requestRate);
  j["max_concurrency"] =
      s.maxConcurrency > 0 ? json(s.maxConcurrency) : json(nullptr);
  j["accept_length"] = s.acceptLength ? json(*s.acceptLength) : json(nullptr);
  for (auto [name, field] : {std::pair{"completed", &RunSummary::completed},
                             {"failed", &RunSummary::failed},
                             {"total_input_tokens", &RunSummary::totalInput},
                             {"total_output_tokens", &RunSummary::totalOutput},
                             {"total_cached_tokens", &RunSummary::totalCached}})
    j[name] = s.*field;
  for (auto [name, field] :
       {std::pair{"duration", &RunSummary::durationS},
        {"request_throughput", &RunSummary::requestThroughput},
        {"input_throughput", &RunSummary::inputThroughput},
        {"output_throughput", &RunSummary::outputThroughput},
        {"total_throughput", &RunSummary::totalThroughput},
        {"concurrency", &RunSummary::concurrency},
        {"max_output_tokens_per_s", &RunSummary::maxOutputTokensPerS},
        {"cache_hit_rate_pct", &RunSummary::cacheHitRatePct}})
    j[name] = s.*field;
  for (auto [metric, dist] : {std::pair{"ttft", &RunSummary::ttft},
                              {"tpot", &RunSummary::tpot},
                              {"itl", &RunSummary::itl},
                              {"itl_per_token", &RunSummary::itlPerToken},
                              {"e2e_latency", &RunSummary::e2e}})
    for (auto [stat, field] : {std::pair{"mean", &Distribution::mean},
                               {"median", &Distribution::median},
                               {"std", &Distribution::std},
                               {"p90", &Distribution::p90},
                               {"p95", &Distribution::p95},
                               {"p99", &Distribution::p99},
                               {"max", &Distribution::max}})
      j[std::string(stat) + "_" + metric + "_ms"] = (s.*dist).*field;
  j["errors"] = json::array();
  for (size_t i = 0; i < s.errors.size() && i < 10; ++i)
    j["errors"].push_back(s.errors[i]);
  if (!details)
    return j;
  auto column = [&](const char *name, auto get) {
    json values = json::array();
    for (const RequestRecord &r : s.records)
      values.push_back(get(r));
    j[name] = std::move(values);
  };
  column("input_lens", [](const RequestRecord &r) { return r.promptTokens; });
  column("output_lens",
         [](const RequestRecord &r) { return r.completionTokens; });
  column("cached_tokens",
         [](const RequestRecord &r) { return r.cachedTokens; });
  column("ttfts", [](const RequestRecord &r) { return r.ttftS; });
  column("e2e_latencies", [](const RequestRecord &r) { return r.e2eS; });
  column("request_errors", [](const RequestRecord &r) { return r.error; });
  return j;
}

void kiln::loadgen::printSummary(std::FILE *out, const RunSummary &s) {
  auto row = [&](const char *name, double v) {
    std::fprintf(out, "%-40s %.2f\n", name, v);
  };
  auto count = [&](const char *name, int64_t v) {
    std::fprintf(out, "%-40s %lld\n", name, (long long)v);
  };
  auto block = [&](const char *title, const char *unit, const Distribution &d) {
    std::fprintf(out, "---------- %s (ms) ----------\n", title);
    std::fprintf(out,
                 "%-6s mean %.2f  median %.2f  p90 %.2f  p95 %.2f  p99 "
                 "%.2f  max %.2f  (n=%zu)\n",
                 unit, d.mean, d.median, d.p90, d.p95, d.p99, d.max, d.n);
  };
  std::fprintf(out, "============ Serving Benchmark Result ============\n");
  std::fprintf(out, "%-40s %s\n",
               "Traffic request rate:", rateName(s.requestRate).c_str());
  std::fprintf(out, "%-40s %s\n", "Max request concurrency:",
               s.maxConcurrency > 0 ? std::to_string(s.maxConcurrency).c_str()
                                    : "not set");
  count("Successful requests:", s.completed);
  count("Failed requests:", s.failed);
  row("Benchmark duration (s):", s.durationS);
  count("Total input tokens:", s.totalInput);
  count("Total generated tokens:", s.totalOutput);
  row("Request throughput (req/s):", s.requestThroughput);
  row("Input token throughput (tok/s):", s.inputThroughput);
  row("Output token throughput (tok/s):", s.outputThroughput);
  row("Total token throughput (tok/s):", s.totalThroughput);
  row("Peak output tokens in 1 s (tok/s):", s.maxOutputTokensPerS);
  row("Concurrency:", s.concurrency);
  row("Cache hit rate (%):", s.cacheHitRatePct);
  if (s.acceptLength)
    row("Accept length:", *s.acceptLength);
  else
    std::fprintf(out, "%-40s %s\n", "Accept length:", "n/a");
  block("Time to First Token", "TTFT", s.ttft);
  block("Time per Output Token", "TPOT", s.tpot);
  block("Inter-chunk Latency", "ITL", s.itl);
  block("Inter-token Latency", "ITL/t", s.itlPerToken);
  block("End-to-End Latency", "E2E", s.e2e);
  std::fprintf(out, "==================================================\n");
}
