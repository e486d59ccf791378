//===- ServerInfo.cpp - What kiln-loadgen asks a server around a run ------===//

#include "tools/kiln-loadgen/ServerInfo.h"

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <sstream>

using namespace kiln::loadgen;
using nlohmann::json;

std::optional<ModelInfo> kiln::loadgen::discoverModel(const Target &t,
                                                      std::string &error) {
  HttpReply r = httpGet(t, "/v1/models");
  if (!r.ok()) {
    error = r.describe();
    return std::nullopt;
  }
  json j = json::parse(r.body, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("data") || !j["data"].is_array() ||
      j["data"].empty() || !j["data"][0].is_object() ||
      !j["data"][0].contains("id") || !j["data"][0]["id"].is_string()) {
    error = "GET /v1/models: no data[0].id in the answer";
    return std::nullopt;
  }
  const json &m = j["data"][0];
  ModelInfo info;
  info.id = m["id"].get<std::string>();
  if (m.contains("max_model_len") && m["max_model_len"].is_number_integer())
    info.maxModelLen = m["max_model_len"].get<int64_t>();
  return info;
}

std::optional<std::string> kiln::loadgen::flushPrefixCache(const Target &t,
                                                           std::string &error) {
  error.clear();
  for (const char *route : {"/flush_cache", "/reset_prefix_cache"}) {
    HttpReply r = httpPost(t, route, "");
    if (r.ok())
      return std::string(route);
    error +=
        (error.empty() ? "" : "; ") + std::string(route) + ": " + r.describe();
  }
  return std::nullopt;
}

std::optional<double> kiln::loadgen::metricSum(const std::string &text,
                                               const std::string &name) {
  std::istringstream in(text);
  std::string line;
  std::optional<double> sum;
  while (std::getline(in, line)) {
    if (line.compare(0, name.size(), name) != 0 || line.size() <= name.size())
      continue;
    char next = line[name.size()];
    if (next != '{' && next != ' ')
      continue; // a longer name
    size_t value = next == '{' ? line.find('}', name.size()) : name.size();
    if (value == std::string::npos)
      continue;
    const char *begin = line.c_str() + value + 1;
    char *end = nullptr;
    double v = std::strtod(begin, &end);
    if (end == begin)
      continue;
    sum = sum.value_or(0.0) + v;
  }
  return sum;
}

std::optional<SpecCounters> kiln::loadgen::scrapeSpecCounters(const Target &t) {
  HttpReply r = httpGet(t, "/metrics");
  if (!r.ok())
    return std::nullopt;
  for (const char *prefix : {"kiln:", "vllm:", "sglang:"}) {
    std::string p = prefix;
    std::optional<double> drafts =
        metricSum(r.body, p + "spec_decode_num_drafts_total");
    std::optional<double> accepted =
        metricSum(r.body, p + "spec_decode_num_accepted_tokens_total");
    if (drafts && accepted)
      return SpecCounters{*drafts, *accepted, std::nullopt};
  }
  if (std::optional<double> gauge =
          metricSum(r.body, "sglang:spec_accept_length"))
    return SpecCounters{0, 0, gauge};
  return std::nullopt;
}

std::optional<double>
kiln::loadgen::acceptLength(const std::optional<SpecCounters> &before,
                            const std::optional<SpecCounters> &after) {
  if (!after)
    return std::nullopt;
  if (after->acceptLengthGauge)
    return *after->acceptLengthGauge > 0 ? after->acceptLengthGauge
                                         : std::nullopt;
  double drafts = after->drafts - (before ? before->drafts : 0.0);
  double accepted = after->accepted - (before ? before->accepted : 0.0);
  if (drafts <= 0)
    return std::nullopt;
  return 1.0 + accepted / drafts;
}
