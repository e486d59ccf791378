//===- kiln-serve.cpp - An OpenAI-compatible HTTP server ------------------===//
//
//   kiln-serve model.kiln [--host 127.0.0.1] [--port 8000] [--api-key KEY]
//
// Serves /v1/completions and /v1/chat/completions (streaming as Server-Sent
// Events or not; chat output split into content, reasoning_content and
// tool_calls by GlmOutput.h), /v1/models, /health, /metrics (Prometheus text,
// ServerMetrics.h) and /flush_cache (alias /reset_prefix_cache) over the
// serving engine (runtime/serve/EngineLoop.h), with cpp-httplib. The port is
// bound before the model loads: /health answers 503 until it is ready. Each
// connection's thread submits its request and waits for its tokens; a client
// that goes away mid-stream cancels its request. While busy, a line of
// throughput and cache figures goes to stderr every --log-interval seconds.
// SIGTERM/SIGINT drain: new requests get 503, running ones finish, then the
// server exits 0.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/CpuFeatures.h"
#include "runtime/engine/Model.h"
#include "runtime/serve/EngineLoop.h"
#include "tools/common/ArgParse.h"
#include "tools/kiln-serve/OpenAiApi.h"
#include "tools/kiln-serve/ServerMetrics.h"

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

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

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
  --log-interval S          seconds between status lines while busy
                            (default 5; 0: none)
  -h, --help                this help
)";

struct Options {
  std::string model, host = "127.0.0.1", portFile, servedName, apiKey;
  int port = 8000;
  int64_t maxBody = int64_t(4) << 20, maxWaiting = 1024, threads = 0, spec = -1,
          logInterval = 5;
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

int64_t unixTime() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

double seconds() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// What the engine thread hands a connection: the text and tokens so far
/// (stop ids left out, as in the output), and the end.
struct Channel {
  std::mutex mutex;
  std::condition_variable cv;
  std::string text; // decoded, not yet sent
  std::vector<int32_t> ids;
  std::vector<TokenLogprob> logprobs;
  bool done = false;
  RequestOutput out;
};

/// A streaming response's progress.
struct StreamState {
  explicit StreamState(const api::GlmOutputOptions &o) : parser(o) {}
  size_t sent = 0;   // bytes of text sent
  size_t lpSent = 0; // tokens whose logprobs were sent
  int64_t textOffset = 0;
  bool first = true;
  api::GlmOutputParser parser;
};

void sendJson(httplib::Response &res, int status, const api::Json &j) {
  res.status = status;
  res.set_content(j.dump(-1, ' ', false, api::Json::error_handler_t::replace),
                  "application/json");
}

void sendError(httplib::Response &res, const api::ApiError &e) {
  sendJson(res, e.status, e.body());
}

std::string sse(const api::Json &j) {
  return "data: " +
         j.dump(-1, ' ', false, api::Json::error_handler_t::replace) + "\n\n";
}

/// The server before and after the model is loaded.
class Server {
public:
  explicit Server(const Options &o) : o_(o), metrics_(o.servedName) {}

  /// The model is ready: requests are served from now on.
  void ready(engine::Model &model, EngineLoop &loop) {
    model_ = &model;
    loop_ = &loop;
    ctx_.servedModel = o_.servedName;
    ctx_.tokenizer = model.tokenizer();
    ctx_.maxPositions = model.info().maxPositions;
    ready_ = true;
  }
  void drain() { draining_ = true; }
  api::ServerMetrics &metrics() { return metrics_; }

  void routes(httplib::Server &http) {
    http.set_payload_max_length(size_t(o_.maxBody));
    http.set_pre_routing_handler(
        [this](const httplib::Request &req, httplib::Response &res) {
          if (req.path == "/health")
            return httplib::Server::HandlerResponse::Unhandled;
          if (!o_.apiKey.empty() &&
              req.get_header_value("Authorization") != "Bearer " + o_.apiKey) {
            api::ApiError e{401, "invalid or missing API key"};
            e.type = "authentication_error";
            e.code = "invalid_api_key";
            sendError(res, e);
            return httplib::Server::HandlerResponse::Handled;
          }
          if (!ready_) {
            sendError(res, {503, "the model is loading"});
            return httplib::Server::HandlerResponse::Handled;
          }
          return httplib::Server::HandlerResponse::Unhandled;
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
               if (!ready_)
                 sendJson(res, 503, {{"status", "loading"}});
               else if (draining_)
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
                            {"max_model_len", ctx_.maxPositions}}}}});
             });
    http.Get("/metrics",
             [this](const httplib::Request &, httplib::Response &res) {
               res.set_content(metrics_.text(loop_->metrics()),
                               "text/plain; version=0.0.4");
             });
    auto flush = [this](const httplib::Request &, httplib::Response &res) {
      loop_->flushPrefixCache();
      sendJson(res, 200, {{"status", "ok"}});
    };
    http.Post("/flush_cache", flush);        // sglang
    http.Post("/reset_prefix_cache", flush); // vLLM
    http.Post("/v1/completions",
              [this](const httplib::Request &req, httplib::Response &res) {
                handle(api::Route::Completions, req, res);
              });
    http.Post("/v1/chat/completions",
              [this](const httplib::Request &req, httplib::Response &res) {
                handle(api::Route::Chat, req, res);
              });
  }

private:
  void handle(api::Route route, const httplib::Request &req,
              httplib::Response &res) {
    const double arrival = seconds();
    api::ApiError error;
    api::ApiRequest r = api::parseRequest(route, req.body, ctx_, error);
    if (error.status)
      return sendError(res, error);
    if (draining_)
      return sendError(res, {503, "the server is shutting down"});
    if (loop_->metrics().waiting >= o_.maxWaiting)
      return sendError(res, {429, "the queue is full (" +
                                      std::to_string(o_.maxWaiting) +
                                      " requests waiting)"});
    auto ch = std::make_shared<Channel>();
    const Tokenizer *tok = ctx_.tokenizer;
    auto decoder = tok ? std::make_shared<StreamDecoder>(*tok) : nullptr;
    // A stop id ends the text; it is not part of it (as in the output).
    std::vector<int32_t> stops = loop_->stopIdsFor(r.params);
    auto firstToken = std::make_shared<std::atomic<double>>(-1.0);
    api::ServerMetrics *metrics = &metrics_;
    Result<RequestId> id = loop_->submit(
        r.params,
        [ch, decoder, stops, firstToken](int32_t token,
                                         const TokenLogprob *logprob) {
          if (*firstToken < 0)
            *firstToken = seconds();
          if (std::find(stops.begin(), stops.end(), token) != stops.end())
            return;
          std::lock_guard<std::mutex> lock(ch->mutex);
          if (decoder)
            if (Result<std::string> piece = decoder->push(token); piece.isOk())
              ch->text += *piece;
          ch->ids.push_back(token);
          if (logprob)
            ch->logprobs.push_back(*logprob);
          ch->cv.notify_one();
        },
        [ch, metrics, arrival, firstToken](const RequestOutput &out) {
          double ttft = *firstToken;
          metrics->observe(out, ttft < 0 ? -1.0 : ttft - arrival,
                           seconds() - arrival);
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
    r.output.idPrefix = "call_" + std::to_string(*id) + "_";
    if (!r.stream) {
      std::unique_lock<std::mutex> lock(ch->mutex);
      ch->cv.wait(lock, [&] { return ch->done; });
      if (ch->out.finish == FinishReason::Error)
        return sendError(res, {500, ch->out.error, "server_error"});
      api::Output o;
      o.out = &ch->out;
      o.tokens = ch->ids.size();
      if (route == api::Route::Chat)
        o.parsed = api::GlmOutputParser::parse(ch->out.text, r.output);
      return sendJson(
          res, 200, api::response(route, rid, created, o_.servedName, o, tok));
    }
    // Stream: hold back what could be the start of a stop string.
    size_t holdback = 0;
    for (const std::string &s : r.params.stopStrings)
      holdback = std::max(holdback, s.empty() ? 0 : s.size() - 1);
    auto state = std::make_shared<StreamState>(r.output);
    const std::string model = o_.servedName;
    const bool includeUsage = r.includeUsage;
    EngineLoop *loop = loop_;
    const RequestId requestId = *id;
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        "text/event-stream",
        [=](size_t, httplib::DataSink &sink) {
          std::unique_lock<std::mutex> lock(ch->mutex);
          ch->cv.wait_for(lock, std::chrono::milliseconds(500), [&] {
            return ch->done || ch->text.size() > state->sent + holdback;
          });
          StreamState &st = *state;
          // The next piece of text through the chat parser, with the
          // logprobs of the tokens that arrived since the last chunk.
          auto delta = [&](const std::string &piece, bool last) {
            api::OutputDelta d;
            if (route == api::Route::Completions) {
              d.content = piece;
            } else {
              d = st.parser.push(piece);
              if (last) {
                api::OutputDelta rest = st.parser.finish();
                d.reasoning += rest.reasoning;
                d.content += rest.content;
                d.toolCalls.insert(d.toolCalls.end(), rest.toolCalls.begin(),
                                   rest.toolCalls.end());
              }
            }
            return d;
          };
          auto pendingLogprobs = [&] {
            api::Json lp =
                api::logprobs(route, tok, ch->ids, ch->logprobs, st.lpSent,
                              ch->ids.size(), st.textOffset);
            for (size_t i = st.lpSent; i < ch->ids.size(); ++i)
              if (tok)
                if (Result<std::string> t = tok->decode(&ch->ids[i], 1);
                    t.isOk())
                  st.textOffset += int64_t(t->size());
            st.lpSent = ch->ids.size();
            return lp;
          };
          std::string out;
          if (ch->done) {
            const RequestOutput &o = ch->out;
            std::string rest = o.text.size() > st.sent ? o.text.substr(st.sent)
                                                       : std::string();
            if (o.finish == FinishReason::Error) {
              api::ApiError e{500, o.error, "server_error"};
              out += sse(e.body());
            } else {
              api::OutputDelta d = delta(rest, /*last=*/true);
              api::Json lp = pendingLogprobs();
              if (!d.empty() || st.first || !lp.is_null())
                out += sse(api::chunk(route, rid, created, model, d, nullptr,
                                      st.first, lp));
              st.first = false;
              const char *finish =
                  api::finishReason(o, !st.parser.result().toolCalls.empty());
              out += sse(api::chunk(route, rid, created, model, {}, finish,
                                    false, nullptr));
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
          if (ch->text.size() > st.sent + holdback) {
            size_t end = ch->text.size() - holdback;
            api::OutputDelta d =
                delta(ch->text.substr(st.sent, end - st.sent), false);
            st.sent = end;
            api::Json lp = pendingLogprobs();
            if (!d.empty() || !lp.is_null()) {
              out = sse(api::chunk(route, rid, created, model, d, nullptr,
                                   st.first, lp));
              st.first = false;
            }
          } else {
            out = ": keep-alive\n\n"; // also finds a client that has gone
          }
          lock.unlock();
          if (!out.empty() && !sink.write(out.data(), out.size())) {
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

  const Options &o_;
  engine::Model *model_ = nullptr;
  EngineLoop *loop_ = nullptr;
  api::ApiContext ctx_;
  api::ServerMetrics metrics_;
  std::atomic<bool> ready_{false}, draining_{false};
  int64_t started_ = unixTime();
};

/// Debian's libcpp-httplib is built with a listen backlog of 5: a burst of
/// clients connecting at once (a benchmark starting 256 streams) gets
/// connections reset. Linux lets listen() be called again on a listening
/// socket to change its backlog; the server's socket is the one listening on
/// `port`.
void widenBacklog(int port, int backlog) {
  for (int fd = 0; fd < 1024; ++fd) {
    int listening = 0;
    socklen_t len = sizeof listening;
    sockaddr_storage addr{};
    socklen_t alen = sizeof addr;
    if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) != 0 ||
        !listening ||
        getsockname(fd, reinterpret_cast<sockaddr *>(&addr), &alen) != 0)
      continue;
    int bound = addr.ss_family == AF_INET
                    ? ntohs(reinterpret_cast<sockaddr_in &>(addr).sin_port)
                : addr.ss_family == AF_INET6
                    ? ntohs(reinterpret_cast<sockaddr_in6 &>(addr).sin6_port)
                    : -1;
    if (bound == port)
      ::listen(fd, backlog);
  }
}

/// Loads the model and starts the engine; an error message on failure.
struct Loaded {
  std::unique_ptr<engine::Model> model;
  std::unique_ptr<EngineLoop> loop;
  int spec = 0;
};

Result<Loaded> load(Options &o) {
  Loaded l;
  engine::LoadOptions load;
  load.threads = int(o.threads);
  KILN_ASSIGN_OR_RETURN(l.model, engine::Model::load(o.model, load));
  KILN_ASSIGN_OR_RETURN(l.spec, specDrafts(*l.model, o.spec));
  o.engine.specK = l.spec;
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine,
                        Engine::create(*l.model, o.engine));
  std::fprintf(stderr, "%s\n",
               engine->layout().describe(l.model->info().maxPositions).c_str());
  l.loop = std::make_unique<EngineLoop>(std::move(engine));
  return l;
}

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
  Server server(o);
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
  widenBacklog(port, int(connections));
  if (!o.portFile.empty())
    std::ofstream(o.portFile) << port << "\n";
  // Listen while the model loads: /health says 503 until it is ready.
  std::atomic<bool> listenerDone{false};
  std::thread listener([&] {
    http.listen_after_bind();
    listenerDone = true;
  });
  auto stopListener = [&] {
    // stop() only stops a running listener: wait for it to have started.
    while (!http.is_running() && !listenerDone)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    http.stop();
    listener.join();
  };
  Result<Loaded> loaded = load(o);
  if (!loaded.isOk()) {
    std::fprintf(stderr, "kiln-serve: %s\n", loaded.status().message().c_str());
    stopListener();
    return 1;
  }
  EngineLoop &loop = *loaded->loop;
  server.ready(*loaded->model, loop);
  std::fprintf(stderr,
               "kiln-serve: serving '%s' on http://%s:%d (%d threads, spec "
               "%d)\n",
               o.servedName.c_str(), o.host.c_str(), port,
               loaded->model->threads(), loaded->spec);

  std::signal(SIGTERM, onSignal);
  std::signal(SIGINT, onSignal);
  double lastLog = seconds();
  while (!gSignal && !listenerDone) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    const double now = seconds();
    if (o.logInterval > 0 && now - lastLog >= double(o.logInterval)) {
      EngineMetrics m = loop.metrics();
      std::string line = server.metrics().logLine(m, now - lastLog);
      if (m.running + m.waiting > 0)
        std::fprintf(stderr, "kiln-serve: %s\n", line.c_str());
      lastLog = now;
    }
  }
  if (gSignal)
    std::fprintf(stderr, "kiln-serve: signal %d: draining\n", int(gSignal));
  server.drain();
  loop.stop(/*drain=*/true); // running requests finish
  // Give the connections a moment to send their last chunks.
  while (loop.metrics().running > 0)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  stopListener();
  std::fprintf(stderr, "kiln-serve: stopped\n");
  return 0;
}
