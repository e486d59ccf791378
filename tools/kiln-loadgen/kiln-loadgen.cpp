//===- kiln-loadgen.cpp - A load generator for OpenAI-compatible servers --===//
//
//   kiln-loadgen --base-url http://127.0.0.1:8000 --workload reference-scaled
//                --request-rate 2 [--sweep] [--json FILE]
//
// Sends streamed /v1/completions with token-id prompts at Poisson arrivals
// and reports TTFT, TPOT, ITL, e2e latency, throughputs, the prefix-cache
// hit rate and the speculative accept length, with sglang bench_serving's
// names (../shared/SERVING.md 2.5 and 6.4). --sweep runs the workload at
// rising rates and reports the knee: the highest rate whose p95 TTFT, and
// that of every lower rate, stays within --ttft-slo-s with no failure.
// Nothing Kiln-specific is needed from the server.
// Exit status: 0, 1 when a measured request failed (or the server could
// not be asked), 2 on a bad flag.
//
//===----------------------------------------------------------------------===//

#include "tools/common/ArgParse.h"
#include "tools/kiln-loadgen/LoadRun.h"
#include "tools/kiln-loadgen/ServerInfo.h"
#include "tools/kiln-loadgen/Stats.h"
#include "tools/kiln-loadgen/Workload.h"

#include <nlohmann/json.hpp>

#include <sys/resource.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <sstream>

using namespace kiln;
using namespace kiln::loadgen;
using nlohmann::json;

namespace {

const char *kUsage =
    R"(usage: kiln-loadgen --base-url URL (--dataset D | --workload W) [options]

  --base-url URL            the server, e.g. http://127.0.0.1:8000
  --endpoint PATH           completions route (default /v1/completions)
  --model NAME              model id (default: data[0].id of GET /v1/models)
  --api-key KEY             sent as "Authorization: Bearer KEY" (default:
                            $OPENAI_API_KEY)
  --dataset random|shared-prefix
  --workload reference-scaled|reference
                            shared-prefix presets: 750 shared + 500 unique
                            prompt tokens, 64 out (fits a 2,048-token
                            context); or 12,000 + 8,000, 1,000 out
  --num-prompts N           random: requests (default 64)
  --random-input-len N      random: prompt tokens (default 1024)
  --random-output-len N     random: output tokens (default 128)
  --random-range-ratio R    random: lengths uniform in [max(1, L*R), L]
                            (default 1: fixed)
  --groups G                shared-prefix: groups (default 4)
  --prompts-per-group Q     shared-prefix: requests per group (default 8)
  --prefix-len P            shared-prefix: shared tokens (default 750)
  --suffix-len S            shared-prefix: unique tokens (default 500)
  --output-len O            shared-prefix: output tokens (default 64)
  --vocab-size V            token ids are drawn in [--min-token-id, V)
                            (default 2048: safe for any model, the
                            fixture's whole vocabulary)
  --min-token-id N          (default 100, below most special tokens' range)
  --request-rate R          requests/s, Poisson arrivals; inf: all at t=0
                            (default inf)
  --max-concurrency C       requests in flight at most (default: no cap)
  --seed S                  prompts and arrivals (default 1)
  --warmup-requests W       copies of the first request sent before the
                            run, not measured (default 1)
  --flush-cache             flush the server's prefix cache after warm-up
                            (/flush_cache, else /reset_prefix_cache)
  --sweep                   run at rising rates, flushing the prefix cache
                            before each; report the knee
  --sweep-rates a,b,...     the rates, run in rising order (default
                            0.5,1,2,...,64, stopping after the first point
                            over the SLO)
  --ttft-slo-s T            the knee's p95 TTFT bound (default 5)
  --json FILE               write the results with sglang's field names
  --output-details          add per-request lists to the JSON
  --timeout-s T             per request (default 600)
  -h, --help                this help
)";

struct Options {
  RunOptions run;
  WorkloadOptions workload;
  std::string jsonPath, workloadName;
  bool datasetGiven = false, flush = false, sweep = false, details = false;
  int64_t warmup = 1;
  std::vector<double> sweepRates;
  double ttftSloS = 5;
};

using tools::intFlag;
using tools::UsageError;

double numberFlag(const std::string &flag, const std::string &value, double lo,
                  double hi, bool allowInf = false) {
  if (allowInf && (value == "inf" || value == "infinity"))
    return std::numeric_limits<double>::infinity();
  char *end = nullptr;
  double v = std::strtod(value.c_str(), &end);
  if (value.empty() || *end || !std::isfinite(v))
    throw UsageError{flag + ": '" + value + "' is not a number"};
  if (v < lo || v > hi) {
    std::ostringstream os;
    os << flag << ": " << value << " is out of range, expected " << lo << " to "
       << hi;
    throw UsageError{os.str()};
  }
  return v;
}

/// The dataset's counts and lengths, set after a --workload preset.
const std::map<std::string, int64_t WorkloadOptions::*> kLengthFlags = {
    {"--num-prompts", &WorkloadOptions::numPrompts},
    {"--random-input-len", &WorkloadOptions::randomInputLen},
    {"--random-output-len", &WorkloadOptions::randomOutputLen},
    {"--groups", &WorkloadOptions::groups},
    {"--prompts-per-group", &WorkloadOptions::promptsPerGroup},
    {"--prefix-len", &WorkloadOptions::prefixLen},
    {"--suffix-len", &WorkloadOptions::suffixLen},
    {"--output-len", &WorkloadOptions::outputLen}};

Options parseArgs(int argc, char **argv) {
  Options o;
  WorkloadOptions &w = o.workload;
  RunOptions &r = o.run;
  r.requestRate = std::numeric_limits<double>::infinity();
  if (const char *key = std::getenv("OPENAI_API_KEY"))
    r.target.apiKey = key;
  // Explicit lengths win over a preset, in whatever order they come.
  std::vector<std::pair<std::string, std::string>> later;
  std::set<std::string> given;
  std::vector<std::string> args(argv + 1, argv + argc);
  const int64_t kMax = int64_t(1) << 30;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string &a = args[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= args.size())
        throw UsageError{a + " needs a value"};
      return args[++i];
    };
    given.insert(a);
    if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else if (a == "--base-url") {
      r.target.baseUrl = next();
    } else if (a == "--endpoint") {
      r.endpoint = next();
      if (r.endpoint.empty() || r.endpoint[0] != '/')
        throw UsageError{"--endpoint: '" + r.endpoint +
                         "' is not a path starting with /"};
      if (r.endpoint.find("chat/completions") != std::string::npos)
        throw UsageError{"--endpoint: the prompts are token ids, which only "
                         "a completions route takes"};
    } else if (a == "--model") {
      r.model = next();
    } else if (a == "--api-key") {
      r.target.apiKey = next();
    } else if (a == "--dataset") {
      std::string d = next();
      if (d != "random" && d != "shared-prefix")
        throw UsageError{"--dataset: '" + d +
                         "' is not one of random, shared-prefix"};
      w.dataset = d == "random" ? Dataset::Random : Dataset::SharedPrefix;
      o.datasetGiven = true;
    } else if (a == "--workload") {
      o.workloadName = next();
      if (!applyPreset(o.workloadName, w))
        throw UsageError{"--workload: '" + o.workloadName +
                         "' is not one of reference-scaled, reference"};
    } else if (kLengthFlags.count(a)) {
      later.emplace_back(a, next());
    } else if (a == "--random-range-ratio") {
      w.randomRangeRatio = numberFlag(a, next(), 0, 1);
    } else if (a == "--vocab-size") {
      w.tokenHi = intFlag(a, next(), 1, INT32_MAX);
    } else if (a == "--min-token-id") {
      w.tokenLo = intFlag(a, next(), 0, INT32_MAX - 1);
    } else if (a == "--request-rate") {
      r.requestRate = numberFlag(a, next(), 1e-6, 1e9, /*allowInf=*/true);
    } else if (a == "--max-concurrency") {
      r.maxConcurrency = intFlag(a, next(), 1, 1 << 20);
    } else if (a == "--seed") {
      r.seed = w.seed = uint64_t(intFlag(a, next(), 0, INT64_MAX));
    } else if (a == "--warmup-requests") {
      o.warmup = intFlag(a, next(), 0, 1024);
    } else if (a == "--flush-cache") {
      o.flush = true;
    } else if (a == "--sweep") {
      o.sweep = true;
    } else if (a == "--sweep-rates") {
      o.sweep = true;
      std::stringstream list(next());
      std::string item;
      while (std::getline(list, item, ','))
        o.sweepRates.push_back(
            numberFlag(a, item, 1e-6, 1e9, /*allowInf=*/true));
      if (o.sweepRates.empty())
        throw UsageError{"--sweep-rates: no rate given"};
    } else if (a == "--ttft-slo-s") {
      o.ttftSloS = numberFlag(a, next(), 1e-3, 1e6);
    } else if (a == "--json") {
      o.jsonPath = next();
    } else if (a == "--output-details") {
      o.details = true;
    } else if (a == "--timeout-s") {
      r.target.timeoutS = numberFlag(a, next(), 0.001, 1e6);
    } else {
      throw UsageError{"unknown option '" + a + "' (see --help)"};
    }
  }
  if (r.target.baseUrl.empty())
    throw UsageError{"--base-url is required"};
  std::string &url = r.target.baseUrl;
  while (url.size() > 1 && url.back() == '/')
    url.pop_back();
  if (url.rfind("http://", 0) != 0 && url.rfind("https://", 0) != 0)
    throw UsageError{"--base-url: '" + url +
                     "' is not an http:// or https:// URL"};
  if (!o.datasetGiven && o.workloadName.empty())
    throw UsageError{"give --dataset random|shared-prefix or --workload"};
  if (!o.workloadName.empty() && o.datasetGiven &&
      w.dataset != Dataset::SharedPrefix)
    throw UsageError{"--workload: a shared-prefix preset, not with "
                     "--dataset random"};
  const bool random = w.dataset == Dataset::Random;
  for (const auto &[flag, value] : later) {
    bool randomFlag = flag == "--num-prompts" || flag.rfind("--random", 0) == 0;
    if (randomFlag != random)
      throw UsageError{flag + ": not a flag of --dataset " +
                       (random ? "random" : "shared-prefix")};
    w.*kLengthFlags.at(flag) =
        intFlag(flag, value, flag == "--prefix-len" ? 0 : 1, kMax);
  }
  if (w.tokenLo >= w.tokenHi)
    throw UsageError{"--vocab-size: " + std::to_string(w.tokenHi) +
                     " leaves no token id at or above --min-token-id " +
                     std::to_string(w.tokenLo)};
  if (o.sweep && given.count("--request-rate"))
    throw UsageError{"--request-rate: not with --sweep (use --sweep-rates)"};
  return o;
}

/// The counts the server reported around one run, and the run.
RunSummary measure(const RunOptions &run,
                   const std::vector<RequestSpec> &requests) {
  std::optional<SpecCounters> before = scrapeSpecCounters(run.target);
  RunSummary s = runLoad(run, requests);
  s.acceptLength = acceptLength(before, scrapeSpecCounters(run.target));
  return s;
}

void flushOrWarn(const Target &t) {
  std::string error;
  if (!flushPrefixCache(t, error))
    std::fprintf(stderr,
                 "kiln-loadgen: warning: the prefix cache was not flushed "
                 "(%s)\n",
                 error.c_str());
}

void printErrors(const RunSummary &s) {
  for (size_t i = 0; i < s.errors.size() && i < 5; ++i)
    std::fprintf(stderr, "kiln-loadgen: request failed: %s\n",
                 s.errors[i].c_str());
  if (s.errors.size() > 5)
    std::fprintf(stderr, "kiln-loadgen: ... and %zu more failures\n",
                 s.errors.size() - 5);
}

bool writeJson(const std::string &path, const json &j) {
  std::ofstream f(path);
  f << j.dump(2) << "\n";
  if (!f) {
    std::fprintf(stderr, "kiln-loadgen: cannot write %s\n", path.c_str());
    return false;
  }
  return true;
}

json config(const Options &o, const std::vector<RequestSpec> &requests) {
  const WorkloadOptions &w = o.workload;
  json j = {
      {"backend", "openai-completions"}, {"base_url", o.run.target.baseUrl},
      {"endpoint", o.run.endpoint},      {"model_id", o.run.model},
      {"num_prompts", requests.size()},  {"seed", w.seed},
      {"warmup_requests", o.warmup},     {"flush_cache", o.flush || o.sweep}};
  if (w.dataset == Dataset::Random) {
    j["dataset_name"] = "random";
    j["random_input_len"] = w.randomInputLen;
    j["random_output_len"] = w.randomOutputLen;
    j["random_range_ratio"] = w.randomRangeRatio;
  } else {
    j["dataset_name"] = "shared-prefix";
    j["workload"] =
        o.workloadName.empty() ? json(nullptr) : json(o.workloadName);
    j["gsp_num_groups"] = w.groups;
    j["gsp_prompts_per_group"] = w.promptsPerGroup;
    j["gsp_system_prompt_len"] = w.prefixLen;
    j["gsp_question_len"] = w.suffixLen;
    j["gsp_output_len"] = w.outputLen;
  }
  return j;
}

/// --sweep: the points, a table, the knee.
int sweep(const Options &o, const std::vector<RequestSpec> &requests) {
  const bool explicitRates = !o.sweepRates.empty();
  std::vector<double> rates = o.sweepRates;
  if (!explicitRates)
    for (double r = 0.5; r <= 64; r *= 2)
      rates.push_back(r);
  std::sort(rates.begin(), rates.end());
  const double sloMs = o.ttftSloS * 1e3;
  std::vector<RunSummary> points;
  for (double rate : rates) {
    RunOptions run = o.run;
    run.requestRate = rate;
    flushOrWarn(run.target);
    std::fprintf(stderr, "kiln-loadgen: sweep point %s req/s\n",
                 rateName(rate).c_str());
    points.push_back(measure(run, requests));
    const RunSummary &s = points.back();
    printErrors(s);
    if (!explicitRates && (s.failed > 0 || s.ttft.p95 > sloMs))
      break;
  }
  // The knee: the last rate before the first one that misses the SLO, so
  // a lucky point above a missed one (a noisy machine) does not count.
  const RunSummary *knee = nullptr;
  for (const RunSummary &s : points) {
    if (s.failed > 0 || s.completed == 0 || s.ttft.p95 > sloMs)
      break;
    knee = &s;
  }

  std::printf("%-8s %8s %10s %11s %11s %10s %8s %7s %7s %9s\n", "rate", "req/s",
              "out tok/s", "TTFT p50", "TTFT p95", "TPOT mean", "hit %",
              "accept", "failed", "duration");
  for (const RunSummary &s : points) {
    std::string accept =
        s.acceptLength ? std::to_string(*s.acceptLength).substr(0, 4) : "n/a";
    std::printf("%-8s %8.3f %10.2f %9.1fms %9.1fms %8.2fms %8.2f %7s %7lld "
                "%8.1fs\n",
                rateName(s.requestRate).c_str(), s.requestThroughput,
                s.outputThroughput, s.ttft.median, s.ttft.p95, s.tpot.mean,
                s.cacheHitRatePct, accept.c_str(), (long long)s.failed,
                s.durationS);
  }
  if (knee)
    std::printf("knee (p95 TTFT <= %g s): %s req/s, %.2f output tok/s, "
                "TTFT p50 %.1f ms p95 %.1f ms\n",
                o.ttftSloS, rateName(knee->requestRate).c_str(),
                knee->outputThroughput, knee->ttft.median, knee->ttft.p95);
  else
    std::printf("knee (p95 TTFT <= %g s): none of the rates met it\n",
                o.ttftSloS);

  bool failed = false;
  for (const RunSummary &s : points)
    failed = failed || s.failed > 0;
  if (!o.jsonPath.empty()) {
    json j = config(o, requests);
    j["ttft_slo_s"] = o.ttftSloS;
    j["points"] = json::array();
    for (const RunSummary &s : points)
      j["points"].push_back(toJson(s, o.details));
    j["knee"] = knee ? toJson(*knee, false) : json(nullptr);
    if (!writeJson(o.jsonPath, j))
      return 1;
  }
  return failed ? 1 : 0;
}

} // namespace

int main(int argc, char **argv) {
  Options o =
      tools::parseOrExit("kiln-loadgen", [&] { return parseArgs(argc, argv); });
  std::signal(SIGPIPE, SIG_IGN);
  // A socket per request in flight: raise the soft descriptor limit.
  rlimit files{};
  if (getrlimit(RLIMIT_NOFILE, &files) == 0 &&
      files.rlim_cur < files.rlim_max) {
    files.rlim_cur = files.rlim_max;
    setrlimit(RLIMIT_NOFILE, &files);
  }

  const std::vector<RequestSpec> requests = buildWorkload(o.workload);
  int64_t longest = 0;
  for (const RequestSpec &r : requests)
    longest = std::max(longest, int64_t(r.prompt.size()) + r.outputLen);
  if (o.run.model.empty()) {
    std::string error;
    std::optional<ModelInfo> m = discoverModel(o.run.target, error);
    if (!m) {
      std::fprintf(stderr,
                   "kiln-loadgen: cannot find the model (give --model): %s\n",
                   error.c_str());
      return 1;
    }
    o.run.model = m->id;
    if (m->maxModelLen > 0 && longest > m->maxModelLen)
      std::fprintf(stderr,
                   "kiln-loadgen: warning: a request needs %lld tokens, the "
                   "model's context is %lld\n",
                   (long long)longest, (long long)m->maxModelLen);
  }
  std::fprintf(stderr, "kiln-loadgen: model '%s', %zu requests\n",
               o.run.model.c_str(), requests.size());

  if (o.warmup > 0 && !requests.empty()) {
    std::vector<RequestRecord> w = warmUp(o.run, requests.front(), o.warmup);
    if (std::none_of(w.begin(), w.end(),
                     [](const RequestRecord &r) { return r.ok; })) {
      std::fprintf(stderr, "kiln-loadgen: warm-up failed: %s\n",
                   w.front().error.c_str());
      return 1;
    }
  }
  if (o.sweep)
    return sweep(o, requests);

  if (o.flush)
    flushOrWarn(o.run.target);
  RunSummary s = measure(o.run, requests);
  printSummary(stdout, s);
  printErrors(s);
  if (!o.jsonPath.empty()) {
    json j = config(o, requests);
    j.update(toJson(s, o.details));
    if (!writeJson(o.jsonPath, j))
      return 1;
  }
  return s.failed > 0 || s.completed == 0 ? 1 : 0;
}
