//===- kiln-bench.cpp - Throughput and bandwidth of a Kiln artifact -------===//
//
//   kiln-bench model.kiln [--threads 1,2] [--batch 1,4] [--prompt-tokens 128]
//              [--decode-tokens 32] [--membw] [--results FILE] [--label TEXT]
//   kiln-bench --membw [--threads 1,2]
//   kiln-bench model.kiln --spec K [--decode-tokens D]
//
// Prefill tok/s (one sequence, --prompt-tokens), decode time per step and
// tok/s at each batch size (each sequence with a --prompt-tokens context),
// and the achieved weight bandwidth: the bytes of weights one decode step
// reads (WeightTraffic.h) over its time. `--membw` measures this machine's
// read bandwidth (the decode floor; the fraction column) and its STREAM copy
// bandwidth in the same run (MemoryBandwidth.h), so the two can be compared.
// Each row is also appended, as a Markdown table row, to --results (default
// bench/RESULTS.md when it exists). With --spec K it generates D tokens
// greedily from a fixed code prompt through the serving engine, without and
// with speculation, and reports both tok/s, the mean accepted drafts per
// round, the acceptance by position, and the speed-up predicted from what the
// speculative run measured (a round's verify and draft calls against the
// plain run's decode step).
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/CommFactory.h"
#include "runtime/cpu/CpuFeatures.h"
#include "runtime/cpu/ThreadPool.h"
#include "runtime/engine/Generator.h"
#include "runtime/engine/Model.h"
#include "runtime/engine/SpecDecoder.h"
#include "runtime/hip/HipPlanDevice.h"
#include "runtime/serve/GenerateOne.h"
#include "tools/common/RankArtifact.h"
#include "tools/kiln-bench/ComputePeak.h"
#include "tools/kiln-bench/EngineDecode.h"
#include "tools/kiln-bench/MemoryBandwidth.h"
#include "tools/kiln-bench/WeightTraffic.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

using namespace kiln;

namespace {

double now() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

struct Options {
  std::string model;
  std::vector<int> threads; // empty: cpu::availableCpus()
  std::vector<int64_t> batches{1};
  int64_t promptTokens = 128;
  int64_t decodeTokens = 32;
  bool membw = false;
  bool peak = false;
  bool pinThreads = false;
  bool profile = false;
  bool draftInt8 = true;
  int spec = 0;
  std::string device = "cpu";
  std::string results;
  std::string json;
  std::string label;
  std::string command;
};

const char *const kHelp = R"(usage: kiln-bench MODEL.kiln [options]
       kiln-bench --membw [--threads N,...]
       kiln-bench --peak [--threads N,...]

Prefill and decode speed of a Kiln artifact on this machine.

  --threads N,...       kernel threads, each measured in turn (default:
                        the CPUs this process may run on, as kiln-run)
  --batch B,...         decode batch sizes (default 1)
  --prompt-tokens P     prefill length, and the context decode starts at
                        (default 128)
  --decode-tokens D     decode steps measured per batch size (default 32)
  --membw               measure the machine's read (the decode floor) and
                        copy bandwidth in the same run
  --peak                measure the kernel path's FP32 multiply-add peak in
                        the same run (and the int8 and BF16 ones where
                        AVX-512 VNNI and BF16 run); prefill reports its
                        fraction of the FP32 peak, or of the BF16 one under
                        --bf16-activations bf16
  --spec K              greedy decoding with K MTP drafts per round vs none,
                        through the serving engine, and the predicted speed-up
  --profile             time per kernel kind of the prefill and decode steps
  --cpu-affinity        pin each kernel thread to one CPU
  --cpu-path PATH       kernel path: best (default), avx512, avx2 or scalar
  --mxfp4-activations f32|int8
                        MXFP4 matmuls: exact FP32 activations (default) or
                        int8 per 32-value block (docs/cpu.md)
  --bf16-activations f32|bf16
                        BF16 matmuls: exact FP32 activations (default) or
                        rounded to BF16 for vdpbf16ps (docs/cpu.md)
  --draft-activations int8|same
                        MXFP4 weights only the draft plan reads: int8
                        activations (default, where VNNI runs) or as
                        --mxfp4-activations says
  --device cpu|hip      where the plans run (default cpu)
  --results FILE        append a Markdown table (default bench/RESULTS.md
                        when it exists; /dev/null for none)
  --label TEXT          the table's title
  --json FILE           also write every row, the CPU and the kernel path as
                        JSON (weight bytes per token, fraction of the floor)
  -h, --help            this help
)";

/// Multi-rank runs: each rank's time per step in its kernels (compute) and
/// in the collectives (communication, including waiting for the slowest
/// rank), gathered to rank 0.
void printRankTimes(const engine::StepProfile &p, int64_t steps,
                    comm::Communicator &comm) {
  double total = 0, collective = 0, sent = 0;
  for (size_t k = 0; k < p.kKinds; ++k) {
    total += p.seconds[k];
    sent += double(p.bytesSent[k]);
    abi::Kernel kind = abi::Kernel(k);
    // dispatch_rows also routes its rows (a router GEMV) before it sends.
    if (kind == abi::Kernel::AllReduce || kind == abi::Kernel::AllGatherRows ||
        kind == abi::Kernel::ReduceScatterRows ||
        kind == abi::Kernel::DispatchRows || kind == abi::Kernel::CombineRows)
      collective += p.seconds[k];
  }
  std::vector<int64_t> mine = {
      int64_t((total - collective) / double(steps) * 1e9),
      int64_t(collective / double(steps) * 1e9), int64_t(sent / double(steps))};
  std::vector<int64_t> all(3 * size_t(comm.size()));
  Status s = comm.allGather(mine, all);
  if (!s.isOk()) {
    std::fprintf(stderr, "kiln-bench: %s\n", s.toString().c_str());
    return;
  }
  std::printf("    %-6s %16s %22s %20s\n", "rank", "compute us/step",
              "communication us/step", "sent to peers KB/step");
  for (int r = 0; r < comm.size(); ++r)
    std::printf("    %-6d %16.1f %22.1f %20.1f\n", r, double(all[3 * r]) / 1e3,
                double(all[3 * r + 1]) / 1e3, double(all[3 * r + 2]) / 1e3);
}

/// Prints the time per kernel kind that `model` collected over `steps`
/// plan runs that took `seconds` in all, most expensive first; with
/// several ranks, each rank's compute and communication time.
void printProfile(engine::Model &model, const std::string &what, int64_t steps,
                  double seconds, comm::Communicator &comm) {
  const engine::StepProfile &p = model.profile();
  std::vector<size_t> order;
  double total = 0;
  for (size_t k = 0; k < p.kKinds; ++k)
    if (p.calls[k] > 0) {
      order.push_back(k);
      total += p.seconds[k];
    }
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return p.seconds[a] > p.seconds[b]; });
  std::printf("  profile of %s: %.1f us per step, %.1f us in dispatches "
              "(%.0f%%)\n",
              what.c_str(), seconds / double(steps) * 1e6,
              total / double(steps) * 1e6, 100 * total / seconds);
  std::printf("    %-16s %10s %12s %7s\n", "kernel", "calls/step", "us/step",
              "share");
  for (size_t k : order)
    std::printf("    %-16s %10.1f %12.1f %6.1f%%\n",
                std::string(abi::kKernelNames[k]).c_str(),
                double(p.calls[k]) / double(steps),
                p.seconds[k] / double(steps) * 1e6,
                100 * p.seconds[k] / seconds);
  if (comm.size() > 1)
    printRankTimes(p, steps, comm);
}

[[noreturn]] void usage(const std::string &message) {
  std::fprintf(stderr,
               "kiln-bench: %s\nusage: kiln-bench MODEL.kiln [--threads N,...] "
               "[--batch B,...] [--prompt-tokens P] [--decode-tokens D] "
               "[--membw] [--spec K] [--device cpu|hip] [--cpu-affinity] "
               "[--profile] [--cpu-path PATH] [--mxfp4-activations f32|int8] "
               "[--bf16-activations f32|bf16] [--draft-activations int8|same] "
               "[--results FILE] [--json FILE] "
               "[--label TEXT]\n       "
               "kiln-bench "
               "--membw [--threads N,...]\n",
               message.c_str());
  std::exit(2);
}

template <typename T>
std::vector<T> parseList(const std::string &flag, const std::string &value,
                         T min, T max) {
  std::vector<T> out;
  std::stringstream ss(value);
  std::string item;
  while (std::getline(ss, item, ',')) {
    char *end = nullptr;
    long long v = std::strtoll(item.c_str(), &end, 10);
    if (item.empty() || *end || v < min || v > max)
      usage(flag + " takes integers in [" + std::to_string(min) + ", " +
            std::to_string(max) + "], found '" + item + "'");
    out.push_back(T(v));
  }
  if (out.empty())
    usage(flag + " needs a value");
  return out;
}

Options parse(int argc, char **argv) {
  Options o;
  for (int i = 0; i < argc; ++i)
    o.command += (i ? " " : "") + std::string(argv[i]);
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    // --flag=value is --flag value.
    std::optional<std::string> inlineValue;
    if (size_t eq = a.find('=');
        a.rfind("--", 0) == 0 && eq != std::string::npos) {
      inlineValue = a.substr(eq + 1);
      a = a.substr(0, eq);
    }
    auto value = [&]() -> std::string {
      if (inlineValue) {
        std::string v = *inlineValue;
        inlineValue.reset();
        return v;
      }
      if (i + 1 >= argc)
        usage(a + " needs a value");
      return argv[++i];
    };
    if (a == "--threads")
      o.threads = parseList<int>(a, value(), 1, 256);
    else if (a == "--batch")
      o.batches = parseList<int64_t>(a, value(), 1, 256);
    else if (a == "--prompt-tokens")
      o.promptTokens = parseList<int64_t>(a, value(), 1, 1 << 20)[0];
    else if (a == "--decode-tokens")
      o.decodeTokens = parseList<int64_t>(a, value(), 1, 1 << 16)[0];
    else if (a == "--spec")
      o.spec = parseList<int>(a, value(), 0, 16)[0];
    else if (a == "--membw")
      o.membw = true;
    else if (a == "--peak")
      o.peak = true;
    else if (a == "--cpu-affinity")
      o.pinThreads = true;
    else if (a == "--profile")
      o.profile = true;
    else if (a == "--cpu-path") {
      std::string error;
      if (!cpu::setCpuPath(value(), &error))
        usage("--cpu-path: " + error);
    } else if (a == "--mxfp4-activations") {
      std::string error;
      if (!cpu::setMxfp4Activations(value(), &error))
        usage("--mxfp4-activations: " + error);
    } else if (a == "--bf16-activations") {
      std::string error;
      if (!cpu::setBf16Activations(value(), &error))
        usage("--bf16-activations: " + error);
    } else if (a == "--draft-activations") {
      std::string v = value();
      if (v != "int8" && v != "same")
        usage("--draft-activations: '" + v + "', expected int8 or same");
      o.draftInt8 = v == "int8";
    } else if (a == "--help" || a == "-h") {
      std::printf("%s", kHelp);
      std::exit(0);
    } else if (a == "--device") {
      o.device = value();
      if (o.device != "cpu" && o.device != "hip")
        usage("--device: '" + o.device + "', expected cpu or hip");
    } else if (a == "--results")
      o.results = value();
    else if (a == "--label")
      o.label = value();
    else if (a == "--json")
      o.json = value();
    else if (!a.empty() && a[0] == '-')
      usage("unknown option '" + a + "'");
    else if (o.model.empty())
      o.model = a;
    else
      usage("one model only, found a second: '" + a + "'");
    if (inlineValue)
      usage(a + " takes no value");
  }
  if (o.model.empty() && !o.membw && !o.peak)
    usage("no model given");
  if (o.results.empty()) {
    std::ifstream probe("bench/RESULTS.md");
    if (probe)
      o.results = "bench/RESULTS.md";
  }
  return o;
}

std::string today() {
  std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d", std::gmtime(&t));
  return buf;
}

struct Row {
  std::string what;
  int threads;
  int64_t batch;
  double tokPerSec, msPerStep, gbPerSec, membw;
  double weightBytesPerToken = 0;    // decode rows
  double gflops = 0, peakGflops = 0; // prefill rows: matmul FLOP rate, peak
};

/// The rows as one JSON document, for scripts.
void writeJson(const Options &o, const std::vector<Row> &rows) {
  if (o.json.empty())
    return;
  const cpu::CpuFeatures &f = cpu::cpuFeatures();
  nlohmann::json doc;
  doc["command"] = o.command;
  doc["label"] = o.label;
  doc["cpu"] = {
      {"model", f.model},
      {"features", f.list()},
      {"kernel_path", std::string(cpu::cpuPathName(cpu::cpuPath()))},
      {"mxfp4_activations",
       std::string(cpu::mxfp4ActivationsName(cpu::mxfp4Activations()))},
      {"bf16_activations",
       std::string(cpu::bf16ActivationsName(cpu::bf16Activations()))}};
  doc["rows"] = nlohmann::json::array();
  for (const Row &r : rows) {
    nlohmann::json row = {{"what", r.what},
                          {"threads", r.threads},
                          {"batch", r.batch},
                          {"tok_per_s", r.tokPerSec},
                          {"ms_per_step", r.msPerStep},
                          {"weight_gb_per_s", r.gbPerSec},
                          {"read_gb_per_s", r.membw},
                          {"weight_bytes_per_token", r.weightBytesPerToken}};
    row["floor_fraction"] = r.gbPerSec > 0 && r.membw > 0
                                ? nlohmann::json(r.gbPerSec / r.membw)
                                : nlohmann::json(nullptr);
    if (r.gflops > 0)
      row["matmul_gflops"] = r.gflops;
    if (r.peakGflops > 0)
      row["peak_gflops"] = r.peakGflops;
    if (r.gflops > 0 && r.peakGflops > 0)
      row["peak_fraction"] = r.gflops / r.peakGflops;
    doc["rows"].push_back(std::move(row));
  }
  std::ofstream out(o.json);
  out << doc.dump(2) << "\n";
  if (!out)
    std::fprintf(stderr, "kiln-bench: cannot write %s\n", o.json.c_str());
}

void appendResults(const Options &o, const std::vector<Row> &rows) {
  if (o.results.empty())
    return;
  std::ofstream out(o.results, std::ios::app);
  if (!out) {
    std::fprintf(stderr, "kiln-bench: cannot append to %s\n",
                 o.results.c_str());
    return;
  }
  out << "\n### " << today() << " kiln-bench" << (o.label.empty() ? "" : " — ")
      << o.label << "\n\nCommand: `" << o.command
      << "`  \nMachine: " << cpu::cpuSummary()
      << "\n\n| what | threads | batch | tok/s | ms/step | weight GB/s | read "
         "GB/s "
         "| fraction |\n|---|---|---|---|---|---|---|---|\n";
  char line[256];
  for (const Row &r : rows) {
    std::snprintf(
        line, sizeof(line),
        "| %s | %d | %lld | %.1f | %.2f | %.2f | %.2f | %s |\n", r.what.c_str(),
        r.threads, (long long)r.batch, r.tokPerSec, r.msPerStep, r.gbPerSec,
        r.membw,
        r.gbPerSec > 0 && r.membw > 0
            ? (std::to_string(int(100 * r.gbPerSec / r.membw)) + "%").c_str()
            : "");
    out << line;
  }
}

/// Runs `plan` for `tokens` rows of `seqs` at `positions`; logits of the
/// last row of each sequence.
Status step(engine::Model &model, const char *plan,
            const std::vector<int32_t> &ids, const std::vector<int32_t> &seqs,
            const std::vector<int32_t> &positions,
            const std::vector<int32_t> &rows) {
  engine::PlanInputs in;
  in.tokenIds = ids.data();
  in.seqIds = seqs.data();
  in.positions = positions.data();
  in.tokens = int64_t(ids.size());
  in.logitRows = rows.data();
  in.logitCount = int64_t(rows.size());
  auto out = model.run(plan, in);
  return out.isOk() ? Status::ok() : out.status();
}

int fail(const Status &s);

/// Greedy generation through the serving engine (as kiln-run and kiln-serve
/// run it) without and with speculation, and the speed-up predicted from
/// what the speculative run measured: (1 + accepted) decode steps of the
/// plain run against one round's verify call and draft calls.
int benchSpec(engine::Model &model, const Options &o, int threads,
              comm::Communicator &comm, std::vector<Row> &rows) {
  if (!model.hasPlan(engine::kDraftPlan) || !model.tokenizer()) {
    std::fprintf(stderr, "kiln-bench: --spec needs an artifact with a draft "
                         "plan and a tokenizer\n");
    return 1;
  }
  auto prompt = model.tokenizer()->encode(
      "class Stack:\n    def __init__(self, items=None):\n", true);
  if (!prompt.isOk())
    return fail(prompt.status());
  engine::GenerateOptions g;
  g.maxNewTokens = o.decodeTokens;
  g.ignoreEos = true;
  auto run = [&](int k, const char *what, engine::SpecStats *stats,
                 serve::EngineMetrics *metrics) {
    model.profile().reset();
    model.profile().enabled = o.profile;
    auto r = serve::generateOne(model, *prompt, g, k, serve::EngineOptions(),
                                stats, metrics);
    model.profile().enabled = false;
    if (r.isOk() && o.profile)
      printProfile(model, what, int64_t(r->tokens.size()),
                   r->stats.prefillS + r->stats.decodeS, comm);
    return r;
  };
  serve::EngineMetrics m;
  engine::SpecStats stats;
  auto plain =
      run(0, "generation without speculation (per token)", nullptr, nullptr);
  if (!plain.isOk())
    return fail(plain.status());
  auto spec = run(o.spec, "generation with --spec (per token)", &stats, &m);
  if (!spec.isOk())
    return fail(spec.status());
  bool same = plain->tokens == spec->tokens;
  double a = stats.meanAccepted();
  const double rounds = double(std::max<int64_t>(m.specRounds, 1));
  const double tStep = plain->stats.decodeS /
                       double(std::max<size_t>(plain->tokens.size(), 2) - 1);
  const double tVerify = m.specVerifyS / rounds, tDraft = m.specDraftS / rounds;
  const double tRound =
      spec->stats.decodeS / rounds; // includes sampling and bookkeeping
  double predicted = (1.0 + a) * tStep / (tVerify + tDraft);
  double measured =
      spec->stats.decodeTokPerS / std::max(1e-9, plain->stats.decodeTokPerS);
  std::string rates;
  for (double r : stats.acceptRateByPosition())
    rates += (rates.empty() ? "" : " ") + std::to_string(r).substr(0, 5);
  std::printf(
      "spec k=%d, %d thread(s): greedy output %s; decode %.1f tok/s without, "
      "%.1f tok/s with (x%.2f); mean accepted %.3f over %lld rounds, by "
      "position [%s]; a decode step %.3f ms; a round %.3f ms: verify %.3f, "
      "draft %.3f in %.2f calls, the rest %.3f -> predicted x%.2f (measured "
      "%.0f%% of it)\n",
      o.spec, threads, same ? "identical" : "DIFFERENT",
      plain->stats.decodeTokPerS, spec->stats.decodeTokPerS, measured, a,
      (long long)stats.rounds, rates.c_str(), tStep * 1e3, tRound * 1e3,
      tVerify * 1e3, tDraft * 1e3, double(m.specDraftCalls) / rounds,
      (tRound - tVerify - tDraft) * 1e3, predicted, 100 * measured / predicted);
  rows.push_back({"decode, no speculation", threads, 1,
                  plain->stats.decodeTokPerS, 1e3 / plain->stats.decodeTokPerS,
                  0, 0});
  char what[160];
  std::snprintf(what, sizeof(what),
                "decode, --spec %d (mean accepted %.2f, predicted x%.2f, "
                "measured x%.2f)",
                o.spec, a, predicted, measured);
  rows.push_back({what, threads, 1, spec->stats.decodeTokPerS,
                  1e3 / spec->stats.decodeTokPerS, 0, 0});
  return same ? 0 : 1;
}

int fail(const Status &s) {
  std::fprintf(stderr, "kiln-bench: %s\n", s.message().c_str());
  return 1;
}

} // namespace

int main(int argc, char **argv) {
  Options o = parse(argc, argv);
  if (o.threads.empty()) // what kiln-run and kiln-serve use by default
    o.threads = {std::clamp(cpu::availableCpus(), 1, 256)};
  // Expert-parallel artifacts run under mpirun (docs/parallel.md); rank 0
  // alone prints and writes results.
  auto madeComm = comm::makeCommunicator(comm::CommKind::Auto);
  if (!madeComm.isOk())
    return fail(madeComm.status());
  comm::Communicator &comm = **madeComm;
  if (!o.model.empty()) {
    auto path = tools::rankArtifact(o.model, comm);
    if (!path.isOk())
      return fail(path.status());
    o.model = *path;
  }
  if (comm.rank() != 0) {
    o.results = "/dev/null";
    o.json.clear();
  }
  std::printf("%s\n", cpu::cpuSummary().c_str());
  std::vector<Row> rows;
  for (int threads : o.threads) {
    double membw = 0;
    if (o.membw) {
      cpu::PoolOptions po;
      po.pinThreads = o.pinThreads;
      cpu::ThreadPool pool(threads, po);
      bench::Bandwidth bw = bench::measureBandwidth(pool);
      membw = bw.readGBs;
      std::printf("memory bandwidth, %d thread(s): read %.2f GB/s, copy %.2f "
                  "GB/s\n",
                  threads, bw.readGBs, bw.copyGBs);
      if (o.model.empty())
        rows.push_back({"read (1 GiB)", threads, 0, 0, 0, 0, bw.readGBs});
    }
    double peak = 0;
    if (o.peak) {
      cpu::PoolOptions po;
      po.pinThreads = o.pinThreads;
      cpu::ThreadPool pool(threads, po);
      // One line per peak; a table row too when no model is measured.
      auto report = [&](double value, const char *unit, const std::string &what,
                        const std::string &how) {
        std::printf("compute peak, %d thread(s): %.1f %s (%s multiply-add, "
                    "%s)\n",
                    threads, value, unit, what.c_str(), how.c_str());
        if (o.model.empty()) {
          Row r{what + " multiply-add peak", threads, 0, 0, 0, 0, 0};
          r.peakGflops = value;
          rows.push_back(r);
        }
      };
      peak = bench::measureFmaPeakGflops(pool);
      report(peak, "GFLOP/s", "FP32",
             std::string(cpu::cpuPathName(cpu::cpuPath())) + " path");
      // The int8 MXFP4 path's ceiling, where it runs (docs/cpu.md).
      if (const double int8 = bench::measureInt8PeakGops(pool); int8 > 0)
        report(int8, "GOP/s", "int8", "vpdpbusd");
      // The BF16-activation path's ceiling, where it runs; prefill is held
      // against it when that path multiplies the BF16 weights.
      if (const double bf16 = bench::measureBf16PeakGflops(pool); bf16 > 0) {
        report(bf16, "GFLOP/s", "BF16", "vdpbf16ps");
        if (cpu::bf16Activations() == cpu::Bf16Activations::BF16)
          peak = bf16;
      }
    }
    if (o.model.empty())
      continue;
    engine::LoadOptions lo;
    lo.threads = threads;
    lo.pinThreads = o.pinThreads;
    lo.comm = &comm;
    lo.forDevice = o.device == "hip";
    lo.draftInt8Activations = o.draftInt8;
    auto loaded = engine::Model::load(o.model, lo);
    if (!loaded.isOk())
      return fail(loaded.status());
    engine::Model &model = **loaded;
    if (o.device == "hip") {
      // The plans, caches and weights on the GPU; the host only samples.
      hip::HipPlanOptions hipOptions;
      hipOptions.slots = std::max<int64_t>(
          1, *std::max_element(o.batches.begin(), o.batches.end()));
      auto device = hip::HipPlanDevice::create(model, hipOptions);
      if (!device.isOk())
        return fail(device.status());
      Status attached = model.attachDevice(std::move(device).value());
      if (!attached.isOk())
        return fail(attached);
    }
    if (o.spec > 0) {
      if (int rc = benchSpec(model, o, threads, comm, rows))
        return rc;
      continue;
    }
    const int64_t vocab = model.info().vocabSize;
    std::mt19937 rng(1);
    std::uniform_int_distribution<int32_t> token(0, int32_t(vocab - 1));

    // Prefill: one sequence of --prompt-tokens.
    {
      auto seq = model.openSequence();
      if (!seq.isOk())
        return fail(seq.status());
      const size_t n = static_cast<size_t>(o.promptTokens);
      std::vector<int32_t> ids(n), seqs(n, *seq), pos(n);
      for (size_t i = 0; i < ids.size(); ++i) {
        ids[i] = token(rng);
        pos[i] = int32_t(i);
      }
      model.profile().reset();
      model.profile().enabled = o.profile;
      double t0 = now();
      Status s = step(model, engine::kPrefillPlan, ids, seqs, pos,
                      {int32_t(ids.size() - 1)});
      if (!s.isOk())
        return fail(s);
      double dt = now() - t0;
      model.profile().enabled = false;
      model.closeSequence(*seq);
      const fb::Plan *plan = model.artifact().findPlan(engine::kPrefillPlan);
      const double gflops =
          bench::planMatmulFlopsPerToken(model.artifact(), *plan) *
          double(o.promptTokens) / dt / 1e9;
      Row r{"prefill " + std::to_string(o.promptTokens) + " tokens",
            threads,
            1,
            double(o.promptTokens) / dt,
            dt * 1e3,
            0,
            membw};
      r.gflops = gflops;
      r.peakGflops = peak;
      rows.push_back(r);
      std::printf("prefill %lld tokens, %d thread(s): %.1f tok/s, matmuls "
                  "%.1f GFLOP/s%s\n",
                  (long long)o.promptTokens, threads,
                  double(o.promptTokens) / dt, gflops,
                  peak > 0 ? (" (" + std::to_string(int(100 * gflops / peak)) +
                              "% of the compute peak)")
                                 .c_str()
                           : "");
      if (o.profile)
        printProfile(model, "prefill", 1, dt, comm);
    }
    // Decode at each batch size through the serving engine (EngineDecode.h),
    // on the CPU or the device: its page pool in the device's memory.
    for (int64_t batch : o.batches) {
      model.profile().reset();
      model.profile().enabled = o.profile;
      auto r =
          bench::engineDecode(model, batch, o.promptTokens, o.decodeTokens, 1);
      if (!r.isOk())
        return fail(r.status());
      model.profile().enabled = false;
      double total = r->seconds;
      int64_t profiledSteps = r->steps;
      double mean = r->seconds / double(std::max<int64_t>(r->steps, 1));
      double best = r->bestStepS;
      double tokPerSec = double(r->tokens) / r->seconds;
      const fb::Plan *plan = model.artifact().findPlan(engine::kDecodePlan);
      double bytes = bench::planWeightBytes(model.artifact(), *plan, batch);
      double gbps = bytes / mean / 1e9;
      rows.push_back({"decode", threads, batch, tokPerSec, mean * 1e3, gbps,
                      membw, bytes / double(batch)});
      std::printf("decode batch %lld, %d thread(s): %.2f ms/step (best %.2f), "
                  "%.1f tok/s, weights %.3f GB/step -> %.2f GB/s%s\n",
                  (long long)batch, threads, mean * 1e3, best * 1e3, tokPerSec,
                  bytes / 1e9, gbps,
                  membw > 0 ? (" (" + std::to_string(int(100 * gbps / membw)) +
                               "% of read bandwidth)")
                                  .c_str()
                            : "");
      if (o.profile)
        printProfile(model, "decode batch " + std::to_string(batch),
                     profiledSteps, total, comm);
    }
    // On the GPU: how many plan calls (prefill and decode) ran as one HIP
    // graph launch (docs/gpu.md).
    if (auto *hip = dynamic_cast<hip::HipPlanDevice *>(model.device()))
      std::printf("%s: %lld plan call(s) as one HIP graph launch, %lld "
                  "graph(s) captured\n",
                  hip->name().c_str(), (long long)hip->graphLaunches(),
                  (long long)hip->graphsCaptured());
  }
  appendResults(o, rows);
  writeJson(o, rows);
  return 0;
}
