//===- HttpServer.cpp -----------------------------------------------------===//

#include "tools/kiln-serve/HttpServer.h"

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <array>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <thread>

#include <sys/socket.h>

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bh = boost::beast::http;
using tcp = asio::ip::tcp;

namespace kiln::serve::http {

void Pending::wake() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (woken_ || !waker_)
    return;
  woken_ = true;
  waker_();
}

struct Server::Impl {
  ServerOptions options;
  asio::io_context ioc;
  tcp::acceptor acceptor{ioc};
  std::map<std::pair<std::string, std::string>, Handler> routes;
  std::function<std::optional<Response>(const Request &)> guard;
  std::vector<std::thread> threads;
  std::atomic<bool> stopped{false};

  explicit Impl(ServerOptions o)
      : options(std::move(o)), ioc(options.threads) {}
  Response dispatch(const Request &req) const;
  void accept();
  void acceptQueued();
};

/// One connection: reads requests and answers them, one at a time. Every
/// member is touched only on the socket's strand.
class Session : public std::enable_shared_from_this<Session> {
public:
  Session(tcp::socket socket, Server::Impl &server)
      : socket_(std::move(socket)), server_(server),
        timer_(socket_.get_executor()) {}

  void read() {
    parser_.emplace();
    parser_->body_limit(server_.options.maxBody);
    parser_->header_limit(64 * 1024);
    bh::async_read(socket_, buffer_, *parser_,
                   [self = shared_from_this()](beast::error_code ec, size_t) {
                     self->onRead(ec);
                   });
    // A connection that sends no whole request in time is closed: idle
    // keep-alive connections and slow senders do not pile up.
    timer_.expires_after(server_.options.idleTimeout);
    timer_.async_wait([self = shared_from_this()](beast::error_code ec) {
      if (!ec)
        self->close();
    });
  }

private:
  void onRead(beast::error_code ec) {
    timer_.cancel();
    if (ec == bh::error::end_of_stream || ec == asio::error::eof ||
        ec == asio::error::connection_reset ||
        ec == asio::error::operation_aborted)
      return close();
    if (ec == bh::error::body_limit) {
      // The client may still be sending the body: read and drop it after
      // the answer, so that it gets to read the 413.
      linger_ = true;
      return finish(server_.options.error(413, "the request body is too large"),
                    /*keepAlive=*/false);
    }
    if (ec)
      return finish(
          server_.options.error(400, "malformed HTTP request: " + ec.message()),
          false);
    bh::request<bh::string_body> msg = parser_->release();
    Request req;
    req.method = std::string(msg.method_string());
    std::string target(msg.target());
    req.path = target.substr(0, target.find('?'));
    req.body = std::move(msg.body());
    for (const auto &field : msg) {
      std::string name(field.name_string());
      for (char &c : name)
        c = char(std::tolower(static_cast<unsigned char>(c)));
      req.headers[name] = std::string(field.value());
    }
    keepAlive_ = msg.keep_alive();
    version_ = msg.version();
    Response res = server_.dispatch(req);
    if (!res.pending)
      return finish(std::move(res), keepAlive_);
    pending_ = res.pending;
    streaming_ = res.stream;
    whole_.clear();
    {
      std::lock_guard<std::mutex> lock(pending_->mutex_);
      pending_->waker_ = [weak = weak_from_this(),
                          ex = socket_.get_executor()] {
        asio::post(ex, [weak] {
          if (auto self = weak.lock())
            self->pump(false);
        });
      };
    }
    if (!streaming_) {
      watchClose();
      return pump(false);
    }
    head_.emplace(bh::status(res.status), version_);
    head_->set(bh::field::content_type, res.contentType);
    for (const auto &[k, v] : res.headers)
      head_->set(k, v);
    head_->keep_alive(keepAlive_);
    head_->chunked(true);
    serializer_.emplace(*head_);
    writing_ = true;
    bh::async_write_header(
        socket_, *serializer_,
        [self = shared_from_this()](beast::error_code ec, size_t) {
          self->writing_ = false;
          if (ec)
            return self->abandon();
          self->pump(false);
        });
  }

  /// Polls the pending body and writes what it gave; `tick`: the keep-alive
  /// timer fired.
  void pump(bool tick) {
    if (!pending_ || writing_)
      return;
    {
      std::lock_guard<std::mutex> lock(pending_->mutex_);
      pending_->woken_ = false;
    }
    std::string out;
    const bool done = pending_->poll(out);
    if (!streaming_) {
      whole_ += out;
      if (!done)
        return arm();
      Response res;
      res.status = pending_->status;
      res.body = std::move(whole_);
      release();
      return finish(std::move(res), keepAlive_);
    }
    if (out.empty() && !done) {
      if (!tick)
        return arm();
      out = ": keep-alive\n\n"; // also finds a client that has gone
    }
    chunk_ = std::move(out);
    writing_ = true;
    auto then = [self = shared_from_this(), done](beast::error_code ec,
                                                  size_t) {
      self->writing_ = false;
      if (ec)
        return self->abandon();
      if (!done)
        return self->pump(false);
      self->release();
      if (!self->keepAlive_)
        return self->close();
      self->read();
    };
    if (done)
      asio::async_write(socket_,
                        beast::buffers_cat(bh::make_chunk(asio::buffer(chunk_)),
                                           bh::make_chunk_last()),
                        std::move(then));
    else
      asio::async_write(socket_, bh::make_chunk(asio::buffer(chunk_)),
                        std::move(then));
  }

  /// A whole response writes nothing until it is complete: watch the socket
  /// instead, so that a client that goes away cancels its request. A peek
  /// that reads 0 bytes is the end of the stream; bytes of a pipelined
  /// request stay for the next read; nothing to read (a readiness report
  /// that was stale) watches again.
  void watchClose() {
    watching_ = true;
    const uint64_t generation = ++watchGeneration_;
    socket_.async_wait(
        tcp::socket::wait_read,
        [self = shared_from_this(), generation](beast::error_code ec) {
          if (generation != self->watchGeneration_)
            return; // a watch of an earlier response
          self->watching_ = false;
          if (ec || !self->pending_)
            return;
          char c;
          const ssize_t n = ::recv(self->socket_.native_handle(), &c, 1,
                                   MSG_PEEK | MSG_DONTWAIT);
          if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK &&
                         errno != EINTR))
            return self->abandon();
          if (n < 0)
            self->watchClose();
        });
  }

  /// Waits for a wake-up or the keep-alive tick.
  void arm() {
    timer_.expires_after(server_.options.keepAlive);
    timer_.async_wait([self = shared_from_this()](beast::error_code ec) {
      if (!ec)
        self->pump(true);
    });
  }

  /// Writes a whole response, then reads the next request or closes.
  void finish(Response res, bool keepAlive) {
    auto msg = std::make_shared<bh::response<bh::string_body>>(
        bh::status(res.status), version_ ? version_ : 11);
    msg->set(bh::field::content_type, res.contentType);
    for (const auto &[k, v] : res.headers)
      msg->set(k, v);
    msg->keep_alive(keepAlive);
    msg->body() = std::move(res.body);
    msg->prepare_payload();
    bh::async_write(
        socket_, *msg,
        [self = shared_from_this(), msg](beast::error_code ec, size_t) {
          if (!ec && self->linger_)
            return self->linger();
          if (ec || !msg->keep_alive())
            return self->close();
          self->read();
        });
  }

  /// Closes our side, then drops what the client still sends until it
  /// closes too (or for 5 s at most).
  void linger() {
    beast::error_code ec;
    socket_.shutdown(tcp::socket::shutdown_send, ec);
    timer_.expires_after(std::chrono::seconds(5));
    timer_.async_wait([self = shared_from_this()](beast::error_code e) {
      if (!e)
        self->close();
    });
    drop();
  }

  void drop() {
    socket_.async_read_some(
        asio::buffer(scratch_),
        [self = shared_from_this()](beast::error_code ec, size_t) {
          if (ec)
            return self->close();
          self->drop();
        });
  }

  /// The pending body is done with: no more wake-ups reach this session.
  void release() {
    if (!pending_)
      return;
    {
      std::lock_guard<std::mutex> lock(pending_->mutex_);
      pending_->waker_ = nullptr;
    }
    pending_.reset();
    timer_.cancel();
    if (watching_) { // only the watch is outstanding here
      beast::error_code ec;
      socket_.cancel(ec);
      watching_ = false;
      ++watchGeneration_;
    }
    head_.reset();
    serializer_.reset();
  }

  /// The client went away mid-response.
  void abandon() {
    if (pending_)
      pending_->closed();
    release();
    close();
  }

  void close() {
    beast::error_code ec;
    timer_.cancel();
    socket_.shutdown(tcp::socket::shutdown_send, ec);
    socket_.close(ec);
  }

  tcp::socket socket_;
  Server::Impl &server_;
  asio::steady_timer timer_;
  beast::flat_buffer buffer_;
  std::optional<bh::request_parser<bh::string_body>> parser_;
  std::optional<bh::response<bh::empty_body>> head_;
  std::optional<bh::response_serializer<bh::empty_body>> serializer_;
  std::shared_ptr<Pending> pending_;
  std::string chunk_, whole_;
  std::array<char, 16384> scratch_;
  unsigned version_ = 11;
  bool keepAlive_ = false, streaming_ = false, writing_ = false,
       linger_ = false, watching_ = false;
  uint64_t watchGeneration_ = 0;
};

Response Server::Impl::dispatch(const Request &req) const {
  if (guard)
    if (std::optional<Response> early = guard(req))
      return std::move(*early);
  auto it = routes.find({req.method, req.path});
  if (it == routes.end())
    return options.error(404, "no route " + req.method + " " + req.path);
  return it->second(req);
}

void Server::Impl::accept() {
  acceptor.async_accept(
      asio::make_strand(ioc), [this](beast::error_code ec, tcp::socket s) {
        if (stopped || ec == asio::error::operation_aborted)
          return;
        if (!ec) {
          std::make_shared<Session>(std::move(s), *this)->read();
          acceptQueued();
        }
        accept(); // also after EMFILE and the like: the next try may work
      });
}

void Server::Impl::acceptQueued() {
  // Takes every connection already waiting: one async_accept each would
  // hold a burst of connects behind whole turns of the handler queue.
  acceptor.non_blocking(true);
  for (;;) {
    tcp::socket s(asio::make_strand(ioc));
    beast::error_code ec;
    acceptor.accept(s, ec);
    if (ec)
      return;
    std::make_shared<Session>(std::move(s), *this)->read();
  }
}

Server::Server(ServerOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {}

Server::~Server() { stop(); }

void Server::route(const std::string &method, const std::string &path,
                   Handler h) {
  impl_->routes[{method, path}] = std::move(h);
}

void Server::guard(std::function<std::optional<Response>(const Request &)> g) {
  impl_->guard = std::move(g);
}

Result<int> Server::bind(const std::string &host, int port) {
  beast::error_code ec;
  asio::ip::address address = asio::ip::make_address(host, ec);
  if (ec)
    return makeError(StatusCode::InvalidArgument, "'", host,
                     "' is not an IP address: ", ec.message());
  tcp::endpoint at(address, static_cast<unsigned short>(port));
  tcp::acceptor &a = impl_->acceptor;
  a.open(at.protocol(), ec);
  if (!ec)
    a.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec)
    a.bind(at, ec);
  if (!ec)
    a.listen(impl_->options.backlog, ec);
  if (ec)
    return makeError(StatusCode::Unavailable, "cannot listen on ", host, ":",
                     port, ": ", ec.message());
  return int(a.local_endpoint().port());
}

void Server::start() {
  impl_->accept();
  for (int i = 0; i < impl_->options.threads; ++i)
    impl_->threads.emplace_back([this] { impl_->ioc.run(); });
}

void Server::stop() {
  if (impl_->stopped.exchange(true))
    return;
  asio::post(impl_->ioc, [this] {
    beast::error_code ec;
    impl_->acceptor.close(ec);
  });
  impl_->ioc.stop();
  for (std::thread &t : impl_->threads)
    t.join();
  impl_->threads.clear();
}

} // namespace kiln::serve::http
