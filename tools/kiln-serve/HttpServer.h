//===- HttpServer.h - A small HTTP/1.1 server over Boost.Beast --*- C++ -*-===//
//
// kiln-serve's HTTP side: Boost.Beast and Asio (Debian's libboost-dev,
// header-only). Every connection is a session on a strand of one io_context
// that a few threads run, so a connection costs a socket and buffers, not a
// thread (bench/http_sse measured this against cpp-httplib's thread per
// connection: the same at 256-512 streams, less than half the CPU per token
// and a tenth of the engine thread's hand-over time, and better latency from
// 1,024 streams up; docs/kiln-serve.md).
//
// Handlers run on an io thread and must not block. A response that waits on
// the engine returns a `Pending`: the engine thread calls `wake()` when it has
// something, and the session polls it on its strand (and at least every
// `keepAlive`, writing an SSE comment when a stream has nothing new, which
// also finds a client that has gone). A streamed Pending is sent as
// `Transfer-Encoding: chunked` Server-Sent Events; a whole one as one body
// once complete.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TOOLS_KILN_SERVE_HTTPSERVER_H
#define KILN_TOOLS_KILN_SERVE_HTTPSERVER_H

#include "support/Status.h"

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace kiln::serve::http {

struct Request {
  std::string method; // GET, POST, ...
  std::string path;   // the target without its query
  std::string body;
  std::map<std::string, std::string> headers; // names in lower case
  std::string header(const std::string &lowerName) const {
    auto it = headers.find(lowerName);
    return it == headers.end() ? std::string() : it->second;
  }
};

/// A body that is not ready when the handler returns.
class Pending {
public:
  virtual ~Pending() = default;
  /// On the connection's strand: appends what is ready to `out`; true once
  /// the body is complete (`out` holds its last bytes).
  virtual bool poll(std::string &out) = 0;
  /// The client went away before the end.
  virtual void closed() {}
  /// Any thread: ask the session to poll soon.
  void wake();
  /// A whole (not streamed) body's status, read once complete.
  int status = 200;

private:
  friend class Session;
  std::mutex mutex_;
  std::function<void()> waker_; // posts to the session's strand
  bool woken_ = false;
};

struct Response {
  int status = 200;
  std::string contentType = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
  /// Set: the body comes from it, as a stream of chunks (`stream`) or whole.
  std::shared_ptr<Pending> pending;
  bool stream = false;
};

using Handler = std::function<Response(const Request &)>;

struct ServerOptions {
  size_t maxBody = size_t(4) << 20; // 413 above
  int threads = 2;                  // running the io_context
  int backlog = 4096;               // listen backlog
  std::chrono::milliseconds keepAlive{500};
  /// A connection must send a whole request within this, else it is closed.
  std::chrono::seconds idleTimeout{120};
  /// The response for a failure the server finds itself (404, 413, 400).
  std::function<Response(int status, const std::string &message)> error;
};

class Server {
public:
  explicit Server(ServerOptions options);
  ~Server();
  Server(const Server &) = delete;
  Server &operator=(const Server &) = delete;

  void route(const std::string &method, const std::string &path, Handler h);
  /// Runs before routing: a response ends the request there.
  void guard(std::function<std::optional<Response>(const Request &)> g);
  /// Binds and listens; the port (a free one for 0).
  Result<int> bind(const std::string &host, int port);
  /// Serves on `threads` threads until stop().
  void start();
  /// Stops accepting, drops every connection, joins the threads.
  void stop();

  struct Impl;

private:
  std::unique_ptr<Impl> impl_;
};

} // namespace kiln::serve::http

#endif // KILN_TOOLS_KILN_SERVE_HTTPSERVER_H
