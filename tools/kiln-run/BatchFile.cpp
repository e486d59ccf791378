//===- BatchFile.cpp ------------------------------------------------------===//

#include "tools/kiln-run/BatchFile.h"

#include "runtime/comm/Communicator.h"
#include "runtime/serve/WireWords.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

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

/// Rank 0's `readable` and `text` (the batch file) on every rank.
Status shareFile(comm::Communicator &comm, bool &readable, std::string &text) {
  serve::wire::Writer w;
  w.flag(readable);
  w.text(text);
  std::vector<int64_t> words = std::move(w.words);
  KILN_RETURN_IF_ERROR(comm::broadcastVector(comm, words, 0, "the batch file"));
  serve::wire::Reader r(words);
  readable = r.flag("readable flag");
  text = r.text("batch file");
  return r.finish("the batch file");
}

/// Every rank's `text`, in rank order, on every rank.
Result<std::vector<std::string>> gatherText(comm::Communicator &comm,
                                            const std::string &text) {
  serve::wire::Writer w;
  w.text(text);
  KILN_ASSIGN_OR_RETURN(std::vector<std::vector<int64_t>> parts,
                        comm::allGatherParts(comm, w.words));
  std::vector<std::string> texts;
  for (const std::vector<int64_t> &words : parts) {
    serve::wire::Reader r(words);
    texts.push_back(r.text("results"));
    KILN_RETURN_IF_ERROR(r.finish("a rank's results"));
  }
  return texts;
}

} // namespace

Result<int> kiln::tools::runBatchFile(engine::Model &model,
                                      const BatchFileOptions &o) {
  // Data-parallel attention: rank 0 reads the file, each data-parallel
  // group (the tensor-parallel ranks of one expert share) runs every
  // groups-th request and rank 0 writes every result, in input order.
  comm::Communicator *comm = model.comm();
  const bool split =
      model.info().attentionDataParallel && comm && comm->size() > 1;
  const int groupSize = split ? model.info().tensorParallel : 1;
  const int rank = split ? comm->rank() / groupSize : 0,
            ranks = split ? comm->size() / groupSize : 1;
  std::string text;
  bool readable = true;
  if (!split || comm->rank() == 0) {
    std::ifstream file(o.input, std::ios::binary);
    readable = bool(file);
    std::ostringstream bytes;
    if (readable && file.peek() != std::ifstream::traits_type::eof())
      bytes << file.rdbuf(); // (an empty file reads as no requests)
    if (file.bad())
      return makeError(StatusCode::DataLoss, o.input, ": read error");
    text = bytes.str();
  }
  if (split)
    KILN_RETURN_IF_ERROR(shareFile(*comm, readable, text));
  if (!readable)
    return makeError(StatusCode::NotFound, o.input,
                     ": cannot open the batch file");
  std::istringstream in(text);
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine,
                        Engine::create(model, o.engine));
  std::fprintf(stderr, "%s\n",
               engine->layout().describe(model.info().maxPositions).c_str());

  // Submit every line; a bad one gets its error in its place.
  std::vector<json> results;
  std::vector<int64_t> resultLines; // the input line of each result
  std::map<RequestId, size_t> slot;
  std::string line;
  int64_t lineNo = 0, bad = 0, requests = 0;
  while (std::getline(in, line)) {
    ++lineNo;
    if (line.find_first_not_of(" \t\r") == std::string::npos)
      continue; // blank lines carry no request
    if (requests++ % ranks != rank)
      continue; // another data-parallel rank's
    resultLines.push_back(lineNo);
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
  // Join the other ranks' plan calls until they are done too.
  KILN_RETURN_IF_ERROR(model.idle());
  const EngineMetrics &m = engine->metrics();
  std::fprintf(stderr,
               "kiln-run: %lld prompt tokens (%lld from the prefix cache), "
               "%lld generated in %.3f s, %lld preemption(s)\n",
               (long long)m.promptTokens, (long long)m.prefixHitTokens,
               (long long)m.generatedTokens, now() - t0,
               (long long)m.preemptions);
  // Each rejected draft is a rollback of the sequence's caches.
  if (m.specRounds > 0)
    std::fprintf(stderr,
                 "kiln-run: speculation: %lld round(s), %lld draft(s), %lld "
                 "accepted, %lld rolled back\n",
                 (long long)m.specRounds, (long long)m.specDrafted,
                 (long long)m.specAccepted,
                 (long long)(m.specDrafted - m.specAccepted));
  if (split)
    std::fprintf(stderr,
                 "kiln-run: rank %d of %d: %zu request(s) of its own, %lld "
                 "plan call(s) of other ranks joined with no tokens\n",
                 comm->rank(), comm->size(), resultLines.size(),
                 (long long)model.idlePlanCalls());

  if (split) {
    // Every rank's results, each line tagged with its input line.
    // One rank of each group sends the group's results.
    std::string mine;
    for (size_t i = 0; comm->rank() % groupSize == 0 && i < results.size(); ++i)
      mine += std::to_string(resultLines[i]) + " " + dump(results[i]) + "\n";
    KILN_ASSIGN_OR_RETURN(std::vector<std::string> all,
                          gatherText(*comm, mine));
    std::vector<std::pair<int64_t, json>> merged;
    for (const std::string &part : all) {
      std::istringstream lines(part);
      std::string entry;
      while (std::getline(lines, entry)) {
        size_t space = entry.find(' ');
        merged.emplace_back(std::stoll(entry.substr(0, space)),
                            json::parse(entry.substr(space + 1)));
      }
    }
    std::sort(merged.begin(), merged.end(),
              [](const auto &a, const auto &b) { return a.first < b.first; });
    results.clear();
    bad = 0;
    for (auto &[at, r] : merged) {
      bad += r.contains("error") ? 1 : 0;
      results.push_back(std::move(r));
    }
  }

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
