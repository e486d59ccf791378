//===- BatchFile.cpp ------------------------------------------------------===//

#include "tools/kiln-run/BatchFile.h"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>

using namespace kiln;
using namespace kiln::serve;
using nlohmann::json;

namespace {

double now() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

/// The request of one line, or what is wrong with it.
Result<RequestParams> parseLine(const std::string &line,
                                const engine::Model &model,
                                const kiln::tools::BatchFileOptions &o,
                                std::string &label) {
  auto bad = [](const std::string &what) -> Status {
    return makeError(StatusCode::InvalidArgument, what);
  };
  json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded())
    return bad("not valid JSON");
  if (!j.is_object())
    return bad("expected a JSON object");
  RequestParams p = o.defaults;
  try {
    if (j.contains("id"))
      label = j["id"].is_string() ? j["id"].get<std::string>() : j["id"].dump();
    p.id = label;
    bool hasText = j.contains("prompt"), hasIds = j.contains("prompt_ids");
    if (hasText == hasIds)
      return bad("give exactly one of \"prompt\" and \"prompt_ids\"");
    if (hasIds) {
      for (const json &v : j["prompt_ids"]) {
        if (!v.is_number_integer())
          return bad("\"prompt_ids\" must be integers");
        p.prompt.push_back(v.get<int32_t>());
      }
    } else {
      if (!j["prompt"].is_string())
        return bad("\"prompt\" must be a string");
      if (!model.tokenizer())
        return bad("the artifact has no tokenizer: use \"prompt_ids\"");
      Result<std::vector<int32_t>> ids = model.tokenizer()->encode(
          j["prompt"].get<std::string>(), /*parseSpecial=*/true);
      if (!ids.isOk())
        return ids.status();
      p.prompt = std::move(ids).value();
    }
    if (int64_t(p.prompt.size()) > o.maxPromptTokens)
      return bad("the prompt has " + std::to_string(p.prompt.size()) +
                 " tokens, more than --max-prompt-tokens " +
                 std::to_string(o.maxPromptTokens));
    if (j.contains("max_tokens"))
      p.maxTokens = j["max_tokens"].get<int64_t>();
    if (j.contains("temperature"))
      p.sampling.temperature = j["temperature"].get<float>();
    if (j.contains("top_p"))
      p.sampling.topP = j["top_p"].get<float>();
    if (j.contains("top_k"))
      p.sampling.topK = j["top_k"].get<int64_t>();
    if (j.contains("seed"))
      p.sampling.seed = j["seed"].get<uint64_t>();
    if (j.contains("ignore_eos"))
      p.ignoreEos = j["ignore_eos"].get<bool>();
    if (j.contains("stop_token_ids"))
      p.stopIds = j["stop_token_ids"].get<std::vector<int32_t>>();
    if (j.contains("stop")) {
      if (j["stop"].is_string())
        p.stopStrings = {j["stop"].get<std::string>()};
      else
        p.stopStrings = j["stop"].get<std::vector<std::string>>();
    }
  } catch (const json::exception &e) {
    // A field of the wrong type: nlohmann names it in e.what().
    return bad(std::string("a field has the wrong type: ") + e.what());
  }
  return p;
}

std::string dump(const json &j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

} // namespace

Result<int> kiln::tools::runBatchFile(engine::Model &model,
                                      const BatchFileOptions &o) {
  std::ifstream in(o.input);
  if (!in)
    return makeError(StatusCode::NotFound, o.input,
                     ": cannot open the batch file");
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine,
                        Engine::create(model, o.engine));
  std::fprintf(stderr, "%s\n",
               engine->layout().describe(model.info().maxPositions).c_str());

  // Submit every line; a bad one gets its error in its place.
  std::vector<json> results;
  std::map<RequestId, size_t> slot;
  std::string line;
  int64_t lineNo = 0, bad = 0;
  while (std::getline(in, line)) {
    ++lineNo;
    if (line.find_first_not_of(" \t\r") == std::string::npos)
      continue; // blank lines carry no request
    std::string label = std::to_string(lineNo);
    Result<RequestParams> p = parseLine(line, model, o, label);
    Result<RequestId> id = p.isOk() ? engine->submit(*p) : p.status();
    if (!id.isOk()) {
      std::string msg =
          o.input + ":" + std::to_string(lineNo) + ": " + id.status().message();
      std::fprintf(stderr, "kiln-run: %s\n", msg.c_str());
      results.push_back({{"id", label}, {"line", lineNo}, {"error", msg}});
      ++bad;
      continue;
    }
    slot[*id] = results.size();
    results.push_back(nullptr);
  }
  if (in.bad())
    return makeError(StatusCode::DataLoss, o.input, ": read error");

  const double t0 = now();
  double lastReport = t0;
  const size_t total = slot.size();
  size_t done = 0;
  auto progress = [&]() {
    const EngineMetrics &m = engine->metrics();
    double dt = now() - t0;
    std::fprintf(stderr,
                 "kiln-run: %zu/%zu done, %lld running, %lld waiting, "
                 "%lld tokens generated, %.1f tok/s, kv pages %lld/%lld "
                 "used\n",
                 done, total, (long long)m.running, (long long)m.waiting,
                 (long long)m.generatedTokens,
                 dt > 0 ? double(m.generatedTokens) / dt : 0.0,
                 (long long)m.pagesUsed, (long long)m.pagesTotal);
  };
  while (engine->hasWork()) {
    engine->step();
    for (RequestOutput &out : engine->takeFinished()) {
      ++done;
      json r = {{"id", out.id},
                {"prompt_ids", out.prompt},
                {"ids", out.ids},
                {"text", out.text},
                {"finish_reason", finishReasonName(out.finish)},
                {"cached_tokens", out.cachedTokens},
                {"ttft_s", out.ttftS}};
      if (out.finish == FinishReason::Error) {
        r["error"] = out.error;
        ++bad;
      }
      if (out.preemptions)
        r["preemptions"] = out.preemptions;
      results[slot[out.request]] = std::move(r);
    }
    if (now() - lastReport >= 1.0) {
      progress();
      lastReport = now();
    }
  }
  progress();
  const EngineMetrics &m = engine->metrics();
  std::fprintf(stderr,
               "kiln-run: %lld prompt tokens (%lld from the prefix cache), "
               "%lld generated in %.3f s, %lld preemption(s)\n",
               (long long)m.promptTokens, (long long)m.prefixHitTokens,
               (long long)m.generatedTokens, now() - t0,
               (long long)m.preemptions);

  std::ofstream file;
  std::ostream *os = &std::cout;
  if (!o.output.empty()) {
    file.open(o.output, std::ios::binary | std::ios::trunc);
    if (!file)
      return makeError(StatusCode::NotFound, o.output,
                       ": cannot write the results");
    os = &file;
  }
  for (const json &r : results)
    *os << dump(r) << "\n";
  os->flush();
  if (!*os)
    return makeError(StatusCode::DataLoss,
                     o.output.empty() ? "stdout" : o.output, ": write error");
  return bad ? 1 : 0;
}
