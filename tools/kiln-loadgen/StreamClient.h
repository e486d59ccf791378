//===- StreamClient.h - One streamed request, timed -------------*- C++ -*-===//
//
// The HTTP side of kiln-loadgen, with cpp-httplib: a streamed completion
// whose Server-Sent Events are parsed and timed as they arrive (TTFT, the
// time of every content chunk, end to end), its usage chunk (prompt,
// completion and cached tokens), or why it failed (no connection, an HTTP
// status with the server's error message, a malformed event, an error
// event, a stream cut short, a timeout); and the plain GET/POST calls the
// tool makes around a run (/v1/models, /metrics, /flush_cache).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TOOLS_KILN_LOADGEN_STREAMCLIENT_H
#define KILN_TOOLS_KILN_LOADGEN_STREAMCLIENT_H

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace kiln::loadgen {

using Clock = std::chrono::steady_clock;

/// Where requests go: "http://host:port" with an optional path prefix.
struct Target {
  std::string baseUrl;
  std::string apiKey;    // sent as "Authorization: Bearer KEY" when not empty
  double timeoutS = 600; // per request, connection to the end of the stream
};

/// A whole (not streamed) reply; `error` is set when none came.
struct HttpReply {
  int status = 0;
  std::string body;
  std::string error;
  bool ok() const { return error.empty() && status == 200; }
  /// "HTTP 404: <error.message>" or the transport error.
  std::string describe() const;
};

HttpReply httpGet(const Target &t, const std::string &path);
HttpReply httpPost(const Target &t, const std::string &path,
                   const std::string &body);

/// What one streamed request measured. Times are seconds from `sendS`.
struct RequestRecord {
  bool ok = false;
  std::string error;
  double sendS = 0;           // when it was sent, seconds from the run's start
  double ttftS = 0;           // first chunk with non-empty text
  double e2eS = 0;            // the end of the stream
  std::vector<double> chunkS; // every chunk with non-empty text
  /// Tokens in each of those chunks when the server said (a cumulative
  /// usage.completion_tokens on every chunk); empty otherwise.
  std::vector<int64_t> chunkTokens;
  int64_t promptTokens = 0, completionTokens = 0, cachedTokens = 0;
  bool usage = false; // a usage object came (else the counts are estimates)
};

/// Splits a byte stream into Server-Sent Events and hands each event's data
/// (the `data:` lines joined by newlines) to a callback; comment lines
/// (":" pings) and other fields are skipped. The callback returns false to
/// stop reading.
class SseParser {
public:
  using OnData = std::function<bool(const std::string &data)>;
  explicit SseParser(OnData onData) : onData_(std::move(onData)) {}
  /// False once the callback asked to stop.
  bool feed(const char *bytes, size_t n);
  /// Dispatches an event the stream ended without a blank line after.
  bool finish();

private:
  bool line(std::string l);
  OnData onData_;
  std::string buffer_, data_;
  bool hasData_ = false;
};

/// POSTs `body` (a streaming request) to `path` and records the stream.
/// `runStart` is the origin of RequestRecord::sendS; `promptLen` stands in
/// for usage.prompt_tokens when the server sends no usage.
RequestRecord streamRequest(const Target &t, const std::string &path,
                            const std::string &body, int64_t promptLen,
                            Clock::time_point runStart);

} // namespace kiln::loadgen

#endif // KILN_TOOLS_KILN_LOADGEN_STREAMCLIENT_H
