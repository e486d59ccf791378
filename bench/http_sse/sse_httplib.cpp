//===- sse_httplib.cpp - A mock streaming server with cpp-httplib ---------===//
//
//   sse_httplib [--port N] [--port-file F] [--threads N] [--backlog N]
//               [--interval-ms MS]
//
// kiln-serve's HTTP side without the model: Debian's cpp-httplib with one
// pool thread per connection (--threads, kiln-serve's max_running + 64), the
// listen backlog widened after bind as kiln-serve's widenBacklog does, and
// each POST /v1/completions streamed through set_chunked_content_provider
// from a per-request channel that the shared engine thread fills
// (MockEngine.h). GET /v1/models and /health answer as kiln-serve does.
// SIGTERM/SIGINT stop it.
//
//===----------------------------------------------------------------------===//

#include "bench/http_sse/MockEngine.h"

#include <httplib.h>

#include <csignal>
#include <fstream>
#include <memory>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

using namespace kiln::bench;

namespace {

const char *kUsage = R"(usage: sse_httplib [options]
  --host ADDR        (default 127.0.0.1)
  --port N           (default 0: any free port)
  --port-file FILE   write the bound port there once listening
  --threads N        connection threads (default 320: kiln-serve's 256 + 64)
  --backlog N        listen backlog after widening (default: --threads)
  --interval-ms MS   one token per stream every MS (default 20)
)";

std::atomic<int> gSignal{0};
void onSignal(int sig) { gSignal = sig; }

/// What the engine thread hands a connection (kiln-serve's Channel).
struct Channel {
  std::mutex mutex;
  std::condition_variable cv;
  int64_t generated = 0;
  bool done = false;
};

/// kiln-serve's widenBacklog: Debian's build listens with a backlog of 5,
/// and Linux lets listen() be called again to change it.
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

void completions(MockEngine &engine, const httplib::Request &req,
                 httplib::Response &res) {
  CompletionRequest r = parseCompletion(req.body);
  if (!r.error.empty()) {
    res.status = 400;
    res.set_content(errorJson(r.error), "application/json");
    return;
  }
  auto ch = std::make_shared<Channel>();
  const int64_t id =
      engine.submit(r.maxTokens, [ch](int64_t generated, bool done) {
        std::lock_guard<std::mutex> lock(ch->mutex);
        ch->generated = generated;
        ch->done = done;
        ch->cv.notify_one();
      });
  auto sse = std::make_shared<SseStream>(id, r.model);
  auto sent = std::make_shared<int64_t>(0);
  const int64_t promptTokens = r.promptTokens;
  MockEngine *eng = &engine;
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
      [=](size_t, httplib::DataSink &sink) {
        std::unique_lock<std::mutex> lock(ch->mutex);
        ch->cv.wait_for(lock, std::chrono::milliseconds(500),
                        [&] { return ch->done || ch->generated > *sent; });
        const int64_t generated = ch->generated;
        const bool done = ch->done;
        lock.unlock();
        std::string out;
        const int64_t events = generated - *sent;
        for (; *sent < generated; ++*sent)
          out += sse->token();
        if (done)
          out += sse->end(promptTokens, generated);
        if (out.empty())
          out = ": keep-alive\n\n"; // also finds a client that has gone
        if (!sink.write(out.data(), out.size())) {
          eng->cancel(id);
          return false;
        }
        if (events > 0) {
          eng->events += events;
          ++eng->writes;
        }
        if (done)
          sink.done();
        return true;
      },
      [=](bool success) {
        if (!success)
          eng->cancel(id);
      });
}

} // namespace

int main(int argc, char **argv) {
  Flags f = parseFlags(argc, argv, kUsage);
  const size_t threads = size_t(f.threads ? f.threads : 256 + 64);
  const int backlog = int(f.backlog ? f.backlog : int64_t(threads));
  std::signal(SIGPIPE, SIG_IGN);
  MockEngine engine(std::chrono::milliseconds(f.intervalMs));

  httplib::Server http;
  http.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  http.Get("/health", [](const httplib::Request &, httplib::Response &res) {
    res.set_content(R"({"status":"ok"})", "application/json");
  });
  http.Get("/v1/models", [](const httplib::Request &, httplib::Response &res) {
    res.set_content(modelsJson(), "application/json");
  });
  http.Post("/v1/completions",
            [&](const httplib::Request &req, httplib::Response &res) {
              completions(engine, req, res);
            });
  int port = f.port == 0 ? http.bind_to_any_port(f.host)
             : http.bind_to_port(f.host, int(f.port)) ? int(f.port)
                                                      : -1;
  if (port < 0) {
    std::fprintf(stderr, "sse_httplib: cannot listen on %s:%lld\n",
                 f.host.c_str(), (long long)f.port);
    return 1;
  }
  widenBacklog(port, backlog);
  std::thread listener([&] { http.listen_after_bind(); });
  while (!http.is_running())
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  if (!f.portFile.empty())
    std::ofstream(f.portFile) << port << "\n";
  std::fprintf(stderr,
               "sse_httplib: http://%s:%d, %zu connection threads, backlog "
               "%d, a token every %lld ms\n",
               f.host.c_str(), port, threads, backlog, (long long)f.intervalMs);
  std::signal(SIGTERM, onSignal);
  std::signal(SIGINT, onSignal);
  while (!gSignal)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  http.stop();
  listener.join();
  std::fprintf(stderr, "sse_httplib: %s; %lld token events in %lld writes\n",
               engine.report().c_str(), (long long)engine.events.load(),
               (long long)engine.writes.load());
  return 0;
}
