//===- sse_beast.cpp - The mock streaming server with Boost.Beast ---------===//
//
//   sse_beast [--port N] [--port-file F] [--threads N] [--backlog N]
//             [--interval-ms MS]
//
// The same server as sse_httplib.cpp over Boost.Beast and Asio (Debian's
// libboost-dev, header-only): every connection is a Session on a strand of
// one io_context that --threads threads run (default 2), so a connection
// costs a socket and a few buffers, not a thread. A streamed completion
// writes its header with Transfer-Encoding: chunked, then one HTTP chunk per
// engine step (http::make_chunk) and the last chunk after [DONE]. The shared
// engine thread (MockEngine.h) posts each token to its session's strand.
//
//===----------------------------------------------------------------------===//

#include "bench/http_sse/MockEngine.h"

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <csignal>
#include <fstream>
#include <memory>
#include <optional>

using namespace kiln::bench;
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace {

const char *kUsage = R"(usage: sse_beast [options]
  --host ADDR        (default 127.0.0.1)
  --port N           (default 0: any free port)
  --port-file FILE   write the bound port there once listening
  --threads N        threads running the io_context (default 2)
  --backlog N        listen backlog (default SOMAXCONN)
  --interval-ms MS   one token per stream every MS (default 20)
)";

/// One connection: reads requests, answers them, streams completions. Every
/// member is touched only on the socket's strand.
class Session : public std::enable_shared_from_this<Session> {
public:
  Session(tcp::socket socket, MockEngine &engine)
      : socket_(std::move(socket)), engine_(engine) {}

  void read() {
    req_ = {};
    http::async_read(socket_, buffer_, req_,
                     [self = shared_from_this()](beast::error_code ec, size_t) {
                       if (ec)
                         return self->close();
                       self->route();
                     });
  }

private:
  void route() {
    const bool get = req_.method() == http::verb::get;
    if (get && req_.target() == "/health")
      return reply(http::status::ok, R"({"status":"ok"})");
    if (get && req_.target() == "/v1/models")
      return reply(http::status::ok, modelsJson());
    if (req_.method() == http::verb::post && req_.target() == "/v1/completions")
      return stream();
    reply(http::status::not_found, errorJson("no such route"));
  }

  /// A whole JSON response.
  void reply(http::status status, std::string body) {
    auto res = std::make_shared<http::response<http::string_body>>(
        status, req_.version());
    res->set(http::field::content_type, "application/json");
    res->keep_alive(req_.keep_alive());
    res->body() = std::move(body);
    res->prepare_payload();
    http::async_write(
        socket_, *res,
        [self = shared_from_this(), res](beast::error_code ec, size_t) {
          if (ec || !res->keep_alive())
            return self->close();
          self->read();
        });
  }

  void stream() {
    CompletionRequest r = parseCompletion(req_.body());
    if (!r.error.empty())
      return reply(http::status::bad_request, errorJson(r.error));
    keepAlive_ = req_.keep_alive();
    promptTokens_ = r.promptTokens;
    sent_ = generated_ = 0;
    done_ = false;
    // The callback runs on the engine thread: it only posts to the strand,
    // so the first token cannot arrive before this handler has returned.
    id_ = engine_.submit(
        r.maxTokens, [self = shared_from_this()](int64_t generated, bool done) {
          asio::post(self->socket_.get_executor(), [self, generated, done] {
            self->generated_ = generated;
            self->done_ = done;
            self->pump();
          });
        });
    sse_.emplace(id_, r.model);
    head_.emplace(http::status::ok, req_.version());
    head_->set(http::field::content_type, "text/event-stream");
    head_->set(http::field::cache_control, "no-cache");
    head_->keep_alive(keepAlive_);
    head_->chunked(true);
    serializer_.emplace(*head_);
    headerSent_ = writing_ = true;
    http::async_write_header(
        socket_, *serializer_,
        [self = shared_from_this()](beast::error_code ec, size_t) {
          self->writing_ = false;
          if (ec)
            return self->fail();
          self->pump();
        });
  }

  /// Writes the tokens the engine has made since the last write, and the
  /// end once it is done; one write at a time.
  void pump() {
    if (!headerSent_ || writing_)
      return;
    out_.clear();
    const int64_t events = generated_ - sent_;
    for (; sent_ < generated_; ++sent_)
      out_ += sse_->token();
    const bool last = done_;
    if (last)
      out_ += sse_->end(promptTokens_, generated_);
    if (out_.empty())
      return;
    writing_ = true;
    auto then = [self = shared_from_this(), last, events](beast::error_code ec,
                                                          size_t) {
      self->writing_ = false;
      if (ec)
        return self->fail();
      if (events > 0) {
        self->engine_.events += events;
        ++self->engine_.writes;
      }
      if (!last)
        return self->pump();
      self->headerSent_ = false;
      if (!self->keepAlive_)
        return self->close();
      self->read();
    };
    if (last)
      asio::async_write(socket_,
                        beast::buffers_cat(http::make_chunk(asio::buffer(out_)),
                                           http::make_chunk_last()),
                        std::move(then));
    else
      asio::async_write(socket_, http::make_chunk(asio::buffer(out_)),
                        std::move(then));
  }

  /// The client went away mid-stream: the engine stops its request.
  void fail() {
    engine_.cancel(id_);
    headerSent_ = false;
    close();
  }

  void close() {
    beast::error_code ec;
    socket_.shutdown(tcp::socket::shutdown_send, ec);
    socket_.close(ec);
  }

  tcp::socket socket_;
  MockEngine &engine_;
  beast::flat_buffer buffer_;
  http::request<http::string_body> req_;
  std::optional<http::response<http::empty_body>> head_;
  std::optional<http::response_serializer<http::empty_body>> serializer_;
  std::optional<SseStream> sse_;
  std::string out_; // the chunk being written
  int64_t id_ = 0, promptTokens_ = 0, sent_ = 0, generated_ = 0;
  bool done_ = false, keepAlive_ = false, headerSent_ = false, writing_ = false;
};

/// Accepts connections, each onto a strand of its own.
class Listener {
public:
  Listener(asio::io_context &ioc, tcp::acceptor &acceptor, MockEngine &engine)
      : ioc_(ioc), acceptor_(acceptor), engine_(engine), retry_(ioc) {}

  void accept() {
    acceptor_.async_accept(
        asio::make_strand(ioc_), [this](beast::error_code ec, tcp::socket s) {
          if (ec == asio::error::operation_aborted)
            return;
          if (!ec) {
            std::make_shared<Session>(std::move(s), engine_)->read();
            drain();
            return accept();
          }
          // Out of descriptors (EMFILE) and the like: say so, try again
          // shortly instead of spinning.
          std::fprintf(stderr, "sse_beast: accept: %s\n", ec.message().c_str());
          retry_.expires_after(std::chrono::milliseconds(10));
          retry_.async_wait([this](beast::error_code) { accept(); });
        });
  }

private:
  /// Takes every connection already queued: one async_accept per
  /// connection waits a whole turn of the handler queue each, which behind
  /// thousands of streams' writes held a burst of 2048 connects for over a
  /// second.
  void drain() {
    acceptor_.non_blocking(true);
    for (;;) {
      tcp::socket s(asio::make_strand(ioc_));
      beast::error_code ec;
      acceptor_.accept(s, ec);
      if (ec)
        return;
      std::make_shared<Session>(std::move(s), engine_)->read();
    }
  }

  asio::io_context &ioc_;
  tcp::acceptor &acceptor_;
  MockEngine &engine_;
  asio::steady_timer retry_;
};

} // namespace

int main(int argc, char **argv) {
  Flags f = parseFlags(argc, argv, kUsage);
  const int threads = int(f.threads ? f.threads : 2);
  const int backlog =
      int(f.backlog ? f.backlog : asio::socket_base::max_listen_connections);
  // Declared after the io_context, so it stops (and drops the sessions its
  // callbacks hold) before the io_context goes.
  asio::io_context ioc(threads);
  tcp::acceptor acceptor(ioc);
  MockEngine engine(std::chrono::milliseconds(f.intervalMs));
  try {
    tcp::endpoint at(asio::ip::make_address(f.host),
                     static_cast<unsigned short>(f.port));
    acceptor.open(at.protocol());
    acceptor.set_option(asio::socket_base::reuse_address(true));
    acceptor.bind(at);
    acceptor.listen(backlog);
  } catch (const boost::system::system_error &e) {
    std::fprintf(stderr, "sse_beast: cannot listen on %s:%lld: %s\n",
                 f.host.c_str(), (long long)f.port, e.what());
    return 1;
  }
  const int port = acceptor.local_endpoint().port();
  Listener listener(ioc, acceptor, engine);
  listener.accept();
  asio::signal_set signals(ioc, SIGINT, SIGTERM);
  signals.async_wait([&](beast::error_code, int) { ioc.stop(); });
  // A peer that resets mid-write must not kill the process.
  std::signal(SIGPIPE, SIG_IGN);
  if (!f.portFile.empty())
    std::ofstream(f.portFile) << port << "\n";
  std::fprintf(stderr,
               "sse_beast: http://%s:%d, %d io_context threads, backlog %d, a "
               "token every %lld ms\n",
               f.host.c_str(), port, threads, backlog, (long long)f.intervalMs);
  std::vector<std::thread> pool;
  for (int i = 0; i < threads; ++i)
    pool.emplace_back([&] { ioc.run(); });
  for (std::thread &t : pool)
    t.join();
  std::fprintf(stderr, "sse_beast: %s; %lld token events in %lld writes\n",
               engine.report().c_str(), (long long)engine.events.load(),
               (long long)engine.writes.load());
  return 0;
}
