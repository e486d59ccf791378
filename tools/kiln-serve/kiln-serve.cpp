//===- kiln-serve.cpp - An OpenAI-compatible HTTP server ------------------===//
//
//   kiln-serve model.kiln [--host 127.0.0.1] [--port 8000] [--api-key KEY]
//
// Serves /v1/completions and /v1/chat/completions (streaming as Server-Sent
// Events or not), /v1/models, /health, /metrics (Prometheus text) and
// /flush_cache over the serving engine (runtime/serve/EngineLoop.h), with
// cpp-httplib. Each connection's thread submits its request and waits for
// its tokens; a client that goes away mid-stream cancels its request.
// SIGTERM/SIGINT drain: new requests get 503, running ones finish, then the
// server exits 0.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/CpuFeatures.h"
#include "runtime/engine/Model.h"
#include "runtime/serve/EngineLoop.h"
#include "tools/common/ArgParse.h"
#include "tools/kiln-serve/OpenAiApi.h"

#include <httplib.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

using namespace kiln;
using namespace kiln::serve;
using nlohmann::json;

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
  --threads N               kernel threads (default: the CPUs allowed)
  --spec K                  MTP drafts per round (default: the artifact's;
                            0: off)
  --kv-memory BYTES         KV page pool (suffix K, M, G; default a quarter
                            of the available memory)
  --kv-fraction F           without --kv-memory: this fraction of the
                            available memory (default 0.25)
  --page-size N             tokens per KV page (default 64)
  --max-batched-tokens N    target rows per engine step (default 2048)
  --max-running N           requests running at once (default 256)
  --no-prefix-cache         do not share cached prompt prefixes
  -h, --help                this help
)";

struct Options {
  std::string model, host = "127.0.0.1", portFile, servedName, apiKey;
  int port = 8000;
  int64_t maxBody = int64_t(4) << 20, maxWaiting = 1024, threads = 0, spec = -1;
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
    } else if (a == "--threads") {
      o.threads = intFlag(a, next(), 0, 1024);
    } else if (a == "--spec") {
      o.spec = intFlag(a, next(), 0, 16);
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

int64_t unixTime() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

/// What the engine thread hands a connection: text pieces and the end.
struct Channel {
  std::mutex mutex;
  std::condition_variable cv;
  std::string text; // decoded, not yet sent
  bool done = false;
  RequestOutput out;
};

void sendJson(httplib::Response &res, int status, const json &j) {
  res.status = status;
  res.set_content(j.dump(-1, ' ', false, json::error_handler_t::replace),
                  "application/json");
}

void sendError(httplib::Response &res, const api::ApiError &e) {
  sendJson(res, e.status, e.body());
}

std::string sse(const json &j) {
  return "data: " + j.dump(-1, ' ', false, json::error_handler_t::replace) +
         "\n\n";
}

class Server {
public:
  Server(engine::Model &model, EngineLoop &loop, const Options &o)
      : model_(model), loop_(loop), o_(o) {
    ctx_.servedModel = o.servedName;
    ctx_.tokenizer = model.tokenizer();
    ctx_.maxPositions = model.info().maxPositions;
  }

  void routes(httplib::Server &http) {
    http.set_payload_max_length(size_t(o_.maxBody));
    http.set_pre_routing_handler(
        [this](const httplib::Request &req, httplib::Response &res) {
          if (req.path == "/health" || o_.apiKey.empty() ||
              req.get_header_value("Authorization") == "Bearer " + o_.apiKey)
            return httplib::Server::HandlerResponse::Unhandled;
          api::ApiError e{401, "invalid or missing API key"};
          e.type = "authentication_error";
          e.code = "invalid_api_key";
          sendError(res, e);
          return httplib::Server::HandlerResponse::Handled;
        });
    http.set_error_handler(
        [](const httplib::Request &, httplib::Response &res) {
          if (!res.body.empty())
            return;
          api::ApiError e{res.status, res.status == 413
                                          ? "the request body is too large"
                                      : res.status == 404 ? "no such route"
                                                          : "request failed"};
          sendError(res, e);
        });
    http.Get("/health",
             [this](const httplib::Request &, httplib::Response &res) {
               if (draining_)
                 sendJson(res, 503, {{"status", "draining"}});
               else
                 sendJson(res, 200, {{"status", "ok"}});
             });
    http.Get("/v1/models",
             [this](const httplib::Request &, httplib::Response &res) {
               sendJson(res, 200,
                        {{"object", "list"},
                         {"data",
                          {{{"id", o_.servedName},
                            {"object", "model"},
                            {"created", started_},
                            {"owned_by", "kiln"},
                            {"max_model_len", model_.info().maxPositions}}}}});
             });
    http.Get("/metrics",
             [this](const httplib::Request &, httplib::Response &res) {
               res.set_content(metricsText(), "text/plain; version=0.0.4");
             });
    http.Post("/flush_cache",
              [this](const httplib::Request &, httplib::Response &res) {
                loop_.flushPrefixCache();
                sendJson(res, 200, {{"status", "ok"}});
              });
    http.Post("/v1/completions",
              [this](const httplib::Request &req, httplib::Response &res) {
                handle(api::Route::Completions, req, res);
              });
    http.Post("/v1/chat/completions",
              [this](const httplib::Request &req, httplib::Response &res) {
                handle(api::Route::Chat, req, res);
              });
  }

  void drain() { draining_ = true; }

private:
  std::string metricsText() const {
    EngineMetrics m = loop_.metrics();
    std::ostringstream os;
    auto put = [&](const char *name, const char *type, const char *help,
                   double v) {
      os << "# HELP kiln:" << name << " " << help << "\n# TYPE kiln:" << name
         << " " << type << "\nkiln:" << name << "{model_name=\""
         << o_.servedName << "\"} " << v << "\n";
    };
    put("num_requests_running", "gauge", "Requests in the running batch.",
        double(m.running));
    put("num_requests_waiting", "gauge", "Requests waiting to be admitted.",
        double(m.waiting));
    put("kv_cache_usage_perc", "gauge",
        "Fraction of KV pages held by running requests.",
        m.pagesTotal ? double(m.pagesUsed) / double(m.pagesTotal) : 0.0);
    put("kv_cache_pages_free", "gauge", "KV pages free.", double(m.pagesFree));
    put("kv_cache_pages_evictable", "gauge",
        "KV pages held only by the prefix cache.", double(m.pagesEvictable));
    put("prompt_tokens_total", "counter", "Prompt tokens submitted.",
        double(m.promptTokens));
    put("generation_tokens_total", "counter", "Tokens generated.",
        double(m.generatedTokens));
    put("prefix_cache_queries_total", "counter",
        "Tokens looked up in the prefix cache.", double(m.prefixQueriedTokens));
    put("prefix_cache_hits_total", "counter",
        "Tokens found in the prefix cache.", double(m.prefixHitTokens));
    put("num_preemptions_total", "counter", "Requests preempted.",
        double(m.preemptions));
    put("request_success_total", "counter", "Requests finished.",
        double(m.requestsFinished));
    put("request_refused_total", "counter", "Requests refused.",
        double(m.requestsRefused));
    put("spec_decode_num_drafts_total", "counter", "Speculative rounds.",
        double(m.specRounds));
    put("spec_decode_num_draft_tokens_total", "counter", "Drafted tokens.",
        double(m.specDrafted));
    put("spec_decode_num_accepted_tokens_total", "counter",
        "Accepted drafted tokens.", double(m.specAccepted));
    return os.str();
  }

  void handle(api::Route route, const httplib::Request &req,
              httplib::Response &res) {
    api::ApiError error;
    api::ApiRequest r = api::parseRequest(route, req.body, ctx_, error);
    if (error.status)
      return sendError(res, error);
    if (draining_)
      return sendError(res, {503, "the server is shutting down"});
    if (loop_.metrics().waiting >= o_.maxWaiting)
      return sendError(res, {429, "the queue is full (" +
                                      std::to_string(o_.maxWaiting) +
                                      " requests waiting)"});
    auto ch = std::make_shared<Channel>();
    const Tokenizer *tok = model_.tokenizer();
    auto decoder = tok ? std::make_shared<StreamDecoder>(*tok) : nullptr;
    // A stop id ends the text; it is not part of it (as in the output).
    std::vector<int32_t> stops = loop_.stopIdsFor(r.params);
    Result<RequestId> id = loop_.submit(
        r.params,
        [ch, decoder, stops](int32_t token) {
          if (!decoder ||
              std::find(stops.begin(), stops.end(), token) != stops.end())
            return;
          Result<std::string> piece = decoder->push(token);
          std::lock_guard<std::mutex> lock(ch->mutex);
          if (piece.isOk())
            ch->text += *piece;
          ch->cv.notify_one();
        },
        [ch](const RequestOutput &out) {
          std::lock_guard<std::mutex> lock(ch->mutex);
          ch->out = out;
          ch->done = true;
          ch->cv.notify_one();
        });
    if (!id.isOk()) {
      int status = id.status().code() == StatusCode::Unavailable ? 503 : 400;
      return sendError(res, {status, id.status().message()});
    }
    const std::string rid =
        (route == api::Route::Completions ? "cmpl-" : "chatcmpl-") +
        std::to_string(*id);
    const int64_t created = unixTime();
    if (!r.stream) {
      std::unique_lock<std::mutex> lock(ch->mutex);
      ch->cv.wait(lock, [&] { return ch->done; });
      if (ch->out.finish == FinishReason::Error)
        return sendError(res, {500, ch->out.error, "server_error"});
      return sendJson(
          res, 200, api::response(route, rid, created, o_.servedName, ch->out));
    }
    // Stream: hold back what could be the start of a stop string.
    size_t holdback = 0;
    for (const std::string &s : r.params.stopStrings)
      holdback = std::max(holdback, s.empty() ? 0 : s.size() - 1);
    auto state = std::make_shared<std::pair<size_t, bool>>(0, true);
    const std::string model = o_.servedName;
    const bool includeUsage = r.includeUsage;
    EngineLoop *loop = &loop_;
    const RequestId requestId = *id;
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        "text/event-stream",
        [=](size_t, httplib::DataSink &sink) {
          std::unique_lock<std::mutex> lock(ch->mutex);
          ch->cv.wait_for(lock, std::chrono::milliseconds(500), [&] {
            return ch->done || ch->text.size() > state->first + holdback;
          });
          std::string out;
          size_t &sent = state->first;
          bool &first = state->second;
          if (ch->done) {
            const RequestOutput &o = ch->out;
            std::string rest =
                o.text.size() > sent ? o.text.substr(sent) : std::string();
            if (o.finish == FinishReason::Error) {
              api::ApiError e{500, o.error, "server_error"};
              out += sse(e.body());
            } else {
              if (!rest.empty() || first)
                out += sse(api::chunk(route, rid, created, model, rest, nullptr,
                                      first));
              first = false;
              const char *finish =
                  o.finish == FinishReason::Length ? "length" : "stop";
              out += sse(
                  api::chunk(route, rid, created, model, "", finish, false));
              if (includeUsage)
                out += sse(api::usageChunk(route, rid, created, model, o));
            }
            out += "data: [DONE]\n\n";
            lock.unlock();
            if (!sink.write(out.data(), out.size()))
              return false;
            sink.done();
            return true;
          }
          if (ch->text.size() > sent + holdback) {
            size_t end = ch->text.size() - holdback;
            std::string piece = ch->text.substr(sent, end - sent);
            sent = end;
            out = sse(
                api::chunk(route, rid, created, model, piece, nullptr, first));
            first = false;
          } else {
            out = ": keep-alive\n\n"; // also finds a client that has gone
          }
          lock.unlock();
          if (!sink.write(out.data(), out.size())) {
            loop->cancel(requestId);
            return false;
          }
          return true;
        },
        [=](bool success) {
          if (!success)
            loop->cancel(requestId);
        });
  }

  engine::Model &model_;
  EngineLoop &loop_;
  const Options &o_;
  api::ApiContext ctx_;
  std::atomic<bool> draining_{false};
  int64_t started_ = unixTime();
};

} // namespace

int main(int argc, char **argv) {
  Options o;
  try {
    o = parseArgs(argc, argv);
  } catch (const UsageError &e) {
    std::fprintf(stderr, "kiln-serve: %s\n", e.message.c_str());
    return 2;
  }
  std::signal(SIGPIPE, SIG_IGN);
  engine::LoadOptions load;
  load.threads = int(o.threads);
  auto model = engine::Model::load(o.model, load);
  if (!model.isOk()) {
    std::fprintf(stderr, "kiln-serve: %s\n", model.status().message().c_str());
    return 1;
  }
  Result<int> k = specDrafts(**model, o.spec);
  if (!k.isOk()) {
    std::fprintf(stderr, "kiln-serve: %s\n", k.status().message().c_str());
    return 1;
  }
  o.engine.specK = *k;
  auto engine = Engine::create(**model, o.engine);
  if (!engine.isOk()) {
    std::fprintf(stderr, "kiln-serve: %s\n", engine.status().message().c_str());
    return 1;
  }
  std::fprintf(
      stderr, "%s\n",
      (*engine)->layout().describe((*model)->info().maxPositions).c_str());
  EngineLoop loop(std::move(engine).value());
  Server server(**model, loop, o);
  httplib::Server http;
  // A connection's thread waits on its request: room for every running and
  // queued request's connection (httplib's default is 8 threads).
  const size_t connections =
      size_t(std::min<int64_t>(o.engine.maxRunning + 64, 4096));
  http.new_task_queue = [connections] {
    return new httplib::ThreadPool(connections);
  };
  server.routes(http);
  int port = o.port;
  if (port == 0)
    port = http.bind_to_any_port(o.host);
  else if (!http.bind_to_port(o.host, port))
    port = -1;
  if (port < 0) {
    std::fprintf(stderr, "kiln-serve: cannot listen on %s:%d\n", o.host.c_str(),
                 o.port);
    return 1;
  }
  if (!o.portFile.empty())
    std::ofstream(o.portFile) << port << "\n";
  std::fprintf(stderr,
               "kiln-serve: serving '%s' on http://%s:%d (%d threads, spec "
               "%lld)\n",
               o.servedName.c_str(), o.host.c_str(), port, (*model)->threads(),
               (long long)*k);

  std::signal(SIGTERM, onSignal);
  std::signal(SIGINT, onSignal);
  std::thread watcher([&] {
    while (!gSignal)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    std::fprintf(stderr, "kiln-serve: signal %d: draining\n", int(gSignal));
    server.drain();
    loop.stop(/*drain=*/true); // running requests finish
    // Give the connections a moment to send their last chunks.
    while (loop.metrics().running > 0)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    http.stop();
  });
  http.listen_after_bind();
  if (!gSignal)
    gSignal = SIGTERM; // the listener ended by itself: stop the watcher too
  watcher.join();
  std::fprintf(stderr, "kiln-serve: stopped\n");
  return 0;
}
