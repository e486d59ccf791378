//===- kiln-serve.cpp - An OpenAI-compatible HTTP server ------------------===//
//
//   kiln-serve model.kiln [--host 127.0.0.1] [--port 8000] [--api-key KEY]
//
// Serves /v1/completions and /v1/chat/completions (streaming as Server-Sent
// Events or not; chat output split into content, reasoning_content and
// tool_calls by GlmOutput.h), /v1/models, /health, /metrics (Prometheus text,
// ServerMetrics.h) and /flush_cache (alias /reset_prefix_cache) over the
// serving engine (runtime/serve/EngineLoop.h), over Boost.Beast (HttpServer.h;
// requests in Completion.h). The port is
// bound before the model loads: /health answers 503 until it is ready. A
// request is submitted from its connection's handler; the engine thread hands
// it tokens and wakes the connection, which writes them; a client that goes
// away mid-stream cancels its request. While busy, a line of
// throughput and cache figures goes to stderr every --log-interval seconds.
// SIGTERM/SIGINT drain: new requests get 503, running ones finish, then the
// server exits 0.
//
// Under mpirun with an expert-parallel artifact (kiln-compile --ep N,
// docs/parallel.md): rank 0 is the server above; every other rank loads its
// share and runs an engine that follows rank 0's step by step
// (runtime/serve/RankSync.h). SIGTERM to rank 0 drains as with one
// process; the other ranks ignore SIGTERM and SIGINT and stop with it.
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/CommFactory.h"
#include "runtime/cpu/CpuFeatures.h"
#include "runtime/engine/Model.h"
#include "runtime/hip/HipPlanDevice.h"
#include "runtime/serve/EngineLoop.h"
#include "tools/common/ArgParse.h"
#include "tools/common/RankArtifact.h"
#include "tools/kiln-serve/Completion.h"
#include "tools/kiln-serve/HttpServer.h"
#include "tools/kiln-serve/OpenAiApi.h"
#include "tools/kiln-serve/ServerMetrics.h"

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <thread>

using namespace kiln;
using namespace kiln::serve;

namespace {

const char *kUsage =
    R"(usage: kiln-serve MODEL.kiln [options]

  --host ADDR               address to bind (default 127.0.0.1)
  --port N                  port (default 8000; 0: any free port)
  --port-file FILE          write the bound port to FILE once listening
  --served-model-name NAME  the model id clients send (default: the file
                            name without .kiln)
  --api-key KEY             require "Authorization: Bearer KEY" on every
                            route but /health
  --max-body BYTES          largest request body (default 4 MiB; 413 above)
  --max-waiting N           queued requests before 429 (default 1024)
  --http-threads N          threads serving connections (default 2)
  --idle-timeout S          close a connection that sends no whole request
                            for S seconds (default 120)
  --threads N               kernel threads (default: the CPUs allowed)
  --device cpu|hip          where the plans run (default cpu); hip: an AMD
                            GPU through libamdhip64 (the loader path or
                            $KILN_HIP_LIBRARY), the KV page pool in its
                            memory (docs/gpu.md)
  --gpu-ctx N               hip: positions per sequence (default: the
                            model's, at most 8192)
  --gpu-target CHIP         hip: the artifact's code object for CHIP
                            (default: the first the GPU loads)
  --spec K                  MTP drafts per round (default: 0 on the CPU,
                            where drafts do not pay, docs/cpu.md; the
                            artifact's with --device hip)
  --mxfp4-activations f32|int8
                            MXFP4 matmuls: exact FP32 activations (default)
                            or int8 per 32-value block (docs/cpu.md)
  --bf16-activations f32|bf16
                            BF16 matmuls: exact FP32 activations (default)
                            or rounded to BF16 (docs/cpu.md)
  --kv-memory BYTES         KV page pool (suffix K, M, G; default: see
                            --kv-fraction)
  --kv-fraction F           without --kv-memory: this fraction of the
                            available memory (default 0.25 of the host's,
                            0.9 of the GPU's free memory with --device hip)
  --page-size N             tokens per KV page (default 64)
  --max-batched-tokens N    target rows per engine step (default 2048)
  --max-running N           requests running at once (default 256)
  --no-prefix-cache         do not share cached prompt prefixes
  --log-interval S          seconds between status lines while busy
                            (default 5; 0: none)
  -h, --help                this help
)";

struct Options {
  std::string model, host = "127.0.0.1", portFile, servedName, apiKey;
  std::string device = "cpu", gpuTarget;
  int64_t gpuCtx = 0;
  int port = 8000;
  int64_t maxBody = int64_t(4) << 20, maxWaiting = 1024, threads = 0, spec = -1,
          logInterval = 5, httpThreads = 2, idleTimeout = 120;
  EngineOptions engine;
};

using tools::intFlag;
using tools::UsageError;

Options parseArgs(int argc, char **argv) {
  Options o;
  std::vector<std::string> args(argv + 1, argv + argc);
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string &a = args[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= args.size())
        throw UsageError{a + " needs a value"};
      return args[++i];
    };
    if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else if (a == "--host") {
      o.host = next();
    } else if (a == "--port") {
      o.port = int(intFlag(a, next(), 0, 65535));
    } else if (a == "--port-file") {
      o.portFile = next();
    } else if (a == "--served-model-name") {
      o.servedName = next();
    } else if (a == "--api-key") {
      o.apiKey = next();
    } else if (a == "--max-body") {
      o.maxBody = tools::bytesFlag(a, next());
    } else if (a == "--max-waiting") {
      o.maxWaiting = intFlag(a, next(), 1, 1 << 24);
    } else if (a == "--idle-timeout") {
      o.idleTimeout = intFlag(a, next(), 1, 86400);
    } else if (a == "--http-threads") {
      o.httpThreads = intFlag(a, next(), 1, 256);
    } else if (a == "--threads") {
      o.threads = intFlag(a, next(), 0, 1024);
    } else if (a == "--device") {
      o.device = next();
      if (o.device != "cpu" && o.device != "hip")
        throw UsageError{"--device: '" + o.device + "', expected cpu or hip"};
    } else if (a == "--gpu-ctx") {
      o.gpuCtx = intFlag(a, next(), 1, 1 << 24);
    } else if (a == "--gpu-target") {
      o.gpuTarget = next();
    } else if (a == "--spec") {
      o.spec = intFlag(a, next(), 0, 16);
    } else if (a == "--mxfp4-activations") {
      std::string error;
      if (!cpu::setMxfp4Activations(next(), &error))
        throw UsageError{"--mxfp4-activations: " + error};
    } else if (a == "--bf16-activations") {
      std::string error;
      if (!cpu::setBf16Activations(next(), &error))
        throw UsageError{"--bf16-activations: " + error};
    } else if (a == "--kv-memory") {
      o.engine.kvMemoryBytes = tools::bytesFlag(a, next());
    } else if (a == "--kv-fraction") {
      std::string v = next();
      char *end = nullptr;
      o.engine.kvMemoryFraction = std::strtod(v.c_str(), &end);
      if (v.empty() || *end ||
          !(o.engine.kvMemoryFraction > 0 && o.engine.kvMemoryFraction <= 1))
        throw UsageError{"--kv-fraction: '" + v +
                         "' is not a fraction in (0, 1]"};
    } else if (a == "--page-size") {
      o.engine.pageRows = intFlag(a, next(), 1, 65536);
    } else if (a == "--max-batched-tokens") {
      o.engine.maxBatchedTokens = intFlag(a, next(), 1, 1 << 20);
    } else if (a == "--max-running") {
      o.engine.maxRunning = intFlag(a, next(), 1, 1 << 20);
    } else if (a == "--log-interval") {
      o.logInterval = intFlag(a, next(), 0, 3600);
    } else if (a == "--no-prefix-cache") {
      o.engine.prefixCache = false;
    } else if (!a.empty() && a[0] == '-') {
      throw UsageError{"unknown option '" + a + "' (see --help)"};
    } else if (o.model.empty()) {
      o.model = a;
    } else {
      throw UsageError{"unexpected argument '" + a + "'"};
    }
  }
  if (o.model.empty())
    throw UsageError{"no model given"};
  if (o.servedName.empty()) {
    std::string base = o.model.substr(o.model.find_last_of('/') + 1);
    if (base.size() > 5 && base.compare(base.size() - 5, 5, ".kiln") == 0)
      base.resize(base.size() - 5);
    o.servedName = base;
  }
  return o;
}

std::atomic<int> gSignal{0};
void onSignal(int sig) { gSignal = sig; }

/// The routes, before and after the model is loaded.
class Server {
public:
  explicit Server(const Options &o) : o_(o), metrics_(o.servedName) {}

  /// The model is ready: requests are served from now on.
  void ready(engine::Model &model, EngineLoop &loop) {
    loop_ = &loop;
    ctx_.servedModel = o_.servedName;
    ctx_.tokenizer = model.tokenizer();
    ctx_.maxPositions = model.info().maxPositions;
    ready_ = true;
  }
  void drain() { draining_ = true; }
  api::ServerMetrics &metrics() { return metrics_; }

  void routes(http::Server &s) {
    s.guard([this](const http::Request &req) -> std::optional<http::Response> {
      if (req.path == "/health")
        return std::nullopt;
      if (!o_.apiKey.empty() &&
          req.header("authorization") != "Bearer " + o_.apiKey) {
        api::ApiError e{401, "invalid or missing API key"};
        e.type = "authentication_error";
        e.code = "invalid_api_key";
        return errorResponse(e);
      }
      if (!ready_)
        return errorResponse({503, "the model is loading"});
      return std::nullopt;
    });
    s.route("GET", "/health", [this](const http::Request &) {
      return !ready_     ? jsonResponse(503, {{"status", "loading"}})
             : draining_ ? jsonResponse(503, {{"status", "draining"}})
                         : jsonResponse(200, {{"status", "ok"}});
    });
    s.route("GET", "/v1/models", [this](const http::Request &) {
      return jsonResponse(200, {{"object", "list"},
                                {"data",
                                 {{{"id", o_.servedName},
                                   {"object", "model"},
                                   {"created", started_},
                                   {"owned_by", "kiln"},
                                   {"max_model_len", ctx_.maxPositions}}}}});
    });
    s.route("GET", "/metrics", [this](const http::Request &) {
      http::Response r;
      r.contentType = "text/plain; version=0.0.4";
      r.body = metrics_.text(loop_->metrics());
      return r;
    });
    auto flush = [this](const http::Request &) {
      loop_->flushPrefixCache();
      return jsonResponse(200, {{"status", "ok"}});
    };
    s.route("POST", "/flush_cache", flush);        // sglang
    s.route("POST", "/reset_prefix_cache", flush); // vLLM
    s.route("POST", "/v1/completions", [this](const http::Request &req) {
      return handle(api::Route::Completions, req);
    });
    s.route("POST", "/v1/chat/completions", [this](const http::Request &req) {
      return handle(api::Route::Chat, req);
    });
  }

private:
  http::Response handle(api::Route route, const http::Request &req) {
    const double arrival = steadySeconds();
    api::ApiError error;
    api::ApiRequest r = api::parseRequest(route, req.body, ctx_, error);
    if (error.status)
      return errorResponse(error);
    if (draining_)
      return errorResponse({503, "the server is shutting down"});
    if (loop_->metrics().waiting >= o_.maxWaiting)
      return errorResponse({429, "the queue is full (" +
                                     std::to_string(o_.maxWaiting) +
                                     " requests waiting)"});
    auto c = std::make_shared<Completion>(route, std::move(r), ctx_, *loop_,
                                          metrics_, arrival);
    return c->start();
  }

  const Options &o_;
  EngineLoop *loop_ = nullptr;
  api::ApiContext ctx_;
  api::ServerMetrics metrics_;
  std::atomic<bool> ready_{false}, draining_{false};
  int64_t started_ = unixSeconds();
};

/// Loads the model and starts the engine; an error message on failure.
struct Loaded {
  std::unique_ptr<engine::Model> model;
  std::unique_ptr<EngineLoop> loop;
  int spec = 0;
};

/// This rank's model and engine (every rank makes the same calls: the
/// engine's pool size is agreed between them).
Result<std::unique_ptr<Engine>> loadEngine(Options &o, Loaded &l,
                                           comm::Communicator &comm) {
  KILN_ASSIGN_OR_RETURN(std::string path, tools::rankArtifact(o.model, comm));
  engine::LoadOptions load;
  load.threads = int(o.threads);
  load.comm = &comm;
  load.forDevice = o.device == "hip";
  KILN_ASSIGN_OR_RETURN(l.model, engine::Model::load(path, load));
  if (o.device == "hip") {
    hip::HipPlanOptions hip;
    hip.slots = std::min<int64_t>(o.engine.maxRunning, 4096);
    hip.capacity = o.gpuCtx;
    hip.pageRows = o.engine.pageRows;
    hip.target = o.gpuTarget;
    KILN_ASSIGN_OR_RETURN(std::unique_ptr<hip::HipPlanDevice> device,
                          hip::HipPlanDevice::create(*l.model, hip));
    KILN_RETURN_IF_ERROR(l.model->attachDevice(std::move(device)));
  }
  KILN_ASSIGN_OR_RETURN(l.spec, specDrafts(*l.model, o.spec));
  o.engine.specK = l.spec;
  return Engine::create(*l.model, o.engine);
}

Result<Loaded> load(Options &o, comm::Communicator &comm, RankSync *sync) {
  Loaded l;
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, loadEngine(o, l, comm));
  std::fprintf(stderr, "%s\n",
               engine->layout().describe(l.model->info().maxPositions).c_str());
  l.loop = std::make_unique<EngineLoop>(std::move(engine), sync);
  return l;
}

/// A rank other than 0 of an mpirun job: no HTTP side, an engine that does
/// what rank 0's does until rank 0 stops.
int follow(Options &o, comm::Communicator &comm) {
  // mpirun passes a SIGTERM or SIGINT on to every rank: rank 0 drains and
  // tells this one when to stop.
  std::signal(SIGTERM, SIG_IGN);
  std::signal(SIGINT, SIG_IGN);
  Loaded l;
  Result<std::unique_ptr<Engine>> engine = loadEngine(o, l, comm);
  RankSync sync(comm);
  Status followed =
      engine.isOk() ? followEngine(**engine, sync) : engine.status();
  if (!followed.isOk())
    comm.abortAll("kiln-serve: " + followed.message());
  if (l.model->info().attentionDataParallel)
    std::fprintf(stderr,
                 "kiln-serve: rank %d of %d ran %lld request(s) of its own "
                 "and joined %lld plan call(s) of other ranks with no "
                 "tokens\n",
                 comm.rank(), comm.size(),
                 (long long)(*engine)->metrics().requestsFinished,
                 (long long)l.model->idlePlanCalls());
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  Options o =
      tools::parseOrExit("kiln-serve", [&] { return parseArgs(argc, argv); });
  std::signal(SIGPIPE, SIG_IGN);
  Result<std::unique_ptr<comm::Communicator>> comm =
      comm::makeCommunicator(comm::CommKind::Auto);
  if (!comm.isOk()) {
    std::fprintf(stderr, "kiln-serve: %s\n", comm.status().message().c_str());
    return 1;
  }
  if ((*comm)->rank() != 0)
    return follow(o, **comm);
  std::unique_ptr<RankSync> sync;
  if ((*comm)->size() > 1)
    sync = std::make_unique<RankSync>(**comm);
  Server server(o);
  http::ServerOptions httpOptions;
  httpOptions.maxBody = size_t(o.maxBody);
  httpOptions.threads = int(o.httpThreads);
  httpOptions.idleTimeout = std::chrono::seconds(o.idleTimeout);
  httpOptions.error = [](int status, const std::string &message) {
    return errorResponse({status, message});
  };
  http::Server http(httpOptions);
  server.routes(http);
  Result<int> port = http.bind(o.host, o.port);
  if (!port.isOk()) {
    std::fprintf(stderr, "kiln-serve: %s\n", port.status().message().c_str());
    return 1;
  }
  if (!o.portFile.empty())
    std::ofstream(o.portFile) << *port << "\n";
  // Serve while the model loads: /health says 503 until it is ready.
  http.start();
  Result<Loaded> loaded = load(o, **comm, sync.get());
  if (!loaded.isOk()) {
    if (sync) // the other ranks wait in a collective of the load
      (*comm)->abortAll("kiln-serve: " + loaded.status().message());
    std::fprintf(stderr, "kiln-serve: %s\n", loaded.status().message().c_str());
    http.stop();
    return 1;
  }
  EngineLoop &loop = *loaded->loop;
  server.ready(*loaded->model, loop);
  std::fprintf(stderr,
               "kiln-serve: serving '%s' on http://%s:%d (%s, %d threads, "
               "spec %d, %d rank%s)\n",
               o.servedName.c_str(), o.host.c_str(), *port,
               loaded->model->device() ? loaded->model->device()->name().c_str()
                                       : "cpu",
               loaded->model->threads(), loaded->spec, (*comm)->size(),
               (*comm)->size() == 1 ? "" : "s");

  std::signal(SIGTERM, onSignal);
  std::signal(SIGINT, onSignal);
  // The loop stops on its own only when a collective with the other ranks
  // failed: its requests have their error answers; the job ends.
  auto endJobIfFailed = [&] {
    if (Status failed = loop.failure(); !failed.isOk()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      (*comm)->abortAll("kiln-serve: " + failed.message());
    }
  };
  double lastLog = steadySeconds();
  int64_t loggedTokens = 0;
  while (!gSignal) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    endJobIfFailed();
    const double now = steadySeconds();
    if (o.logInterval > 0 && now - lastLog >= double(o.logInterval)) {
      // Busy: requests in the engine now, or tokens since the last line.
      EngineMetrics m = loop.metrics();
      const bool busy = m.running + m.waiting > 0 ||
                        m.promptTokens + m.generatedTokens != loggedTokens;
      loggedTokens = m.promptTokens + m.generatedTokens;
      std::string line = server.metrics().logLine(m, now - lastLog);
      if (busy)
        std::fprintf(stderr, "kiln-serve: %s\n", line.c_str());
      lastLog = now;
    }
  }
  std::fprintf(stderr, "kiln-serve: signal %d: draining\n", int(gSignal));
  server.drain();
  loop.stop(/*drain=*/true); // running requests finish
  endJobIfFailed();
  // Give the connections a moment to send their last chunks.
  while (loop.metrics().running > 0)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  http.stop();
  std::fprintf(stderr, "kiln-serve: stopped\n");
  return 0;
}
