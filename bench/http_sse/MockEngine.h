//===- MockEngine.h - The decode clock both SSE benchmark servers share ---===//
//
// What the two mock servers (sse_httplib.cpp, sse_beast.cpp) have in common,
// so that they differ only in their HTTP library: the "engine" (one thread
// that ticks every decode step and hands each running request its next
// token through a callback, as kiln-serve's EngineLoop does), the OpenAI
// completion chunks as Server-Sent Events, the request body and the flags.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_BENCH_HTTP_SSE_MOCKENGINE_H
#define KILN_BENCH_HTTP_SSE_MOCKENGINE_H

#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

namespace kiln::bench {

/// One thread that plays the serving engine: every `interval` it gives each
/// running request one more token, calling its callback on the engine
/// thread (the connection side must only hand the news over, as kiln-serve's
/// token callback does), and retires the requests that reached max_tokens.
class MockEngine {
public:
  /// `generated` tokens so far; `done` with the last one.
  using OnToken = std::function<void(int64_t generated, bool done)>;

  explicit MockEngine(std::chrono::microseconds interval)
      : interval_(interval), thread_([this] { run(); }) {}
  ~MockEngine() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    cv_.notify_one();
    thread_.join();
  }

  /// Starts a request of `maxTokens` (at least 1); its id for cancel().
  int64_t submit(int64_t maxTokens, OnToken onToken) {
    std::lock_guard<std::mutex> lock(mutex_);
    int64_t id = nextId_++;
    running_.emplace(
        id, Running{std::max<int64_t>(maxTokens, 1), 0, std::move(onToken)});
    cv_.notify_one();
    return id;
  }

  /// The client went away: no more callbacks for `id` after this returns
  /// (the engine calls them with the lock held).
  void cancel(int64_t id) {
    std::lock_guard<std::mutex> lock(mutex_);
    running_.erase(id);
  }

  int64_t running() {
    std::lock_guard<std::mutex> lock(mutex_);
    return int64_t(running_.size());
  }

  /// Steps taken, the time each spent in the callbacks (kiln-serve's engine
  /// thread pays it too), and how late steps started past their time.
  std::string report() {
    std::lock_guard<std::mutex> lock(mutex_);
    char buf[200];
    std::snprintf(buf, sizeof buf,
                  "%lld engine steps (%.2f ms each handing tokens over), %lld "
                  "started over half a step late, the latest by %.1f ms",
                  (long long)steps_,
                  steps_ ? handOverMs_ / double(steps_) : 0.0,
                  (long long)lateSteps_, maxLateMs_);
    return buf;
  }

  /// Token events and the writes that carried them: about 1 event per write
  /// while the server keeps up with the engine, more when it falls behind.
  std::atomic<int64_t> events{0}, writes{0};

private:
  struct Running {
    int64_t maxTokens, generated;
    OnToken onToken;
  };

  void run() {
    std::unique_lock<std::mutex> lock(mutex_);
    auto next = std::chrono::steady_clock::now();
    while (!stop_) {
      if (running_.empty()) {
        cv_.wait(lock, [&] { return stop_ || !running_.empty(); });
        next = std::chrono::steady_clock::now() + interval_;
        continue;
      }
      // A fixed cadence: a late step does not push the later ones back.
      cv_.wait_until(lock, next, [&] { return stop_; });
      double lateMs = std::chrono::duration<double, std::milli>(
                          std::chrono::steady_clock::now() - next)
                          .count();
      ++steps_;
      lateSteps_ += lateMs > 0.5 * double(interval_.count()) / 1000.0;
      maxLateMs_ = std::max(maxLateMs_, lateMs);
      next += interval_;
      auto start = std::chrono::steady_clock::now();
      for (auto it = running_.begin(); it != running_.end();) {
        Running &r = it->second;
        bool done = ++r.generated >= r.maxTokens;
        r.onToken(r.generated, done);
        it = done ? running_.erase(it) : std::next(it);
      }
      handOverMs_ += std::chrono::duration<double, std::milli>(
                         std::chrono::steady_clock::now() - start)
                         .count();
    }
  }

  std::chrono::microseconds interval_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::unordered_map<int64_t, Running> running_;
  int64_t nextId_ = 1, steps_ = 0, lateSteps_ = 0;
  double maxLateMs_ = 0, handOverMs_ = 0;
  bool stop_ = false;
  std::thread thread_; // last: starts once the members above exist
};

/// The parts of a /v1/completions body the mock uses: the prompt is only
/// counted (token ids; 0 for text). An empty `error` when the body is usable.
struct CompletionRequest {
  int64_t maxTokens = 16, promptTokens = 0;
  std::string model = "mock", error;
};

inline CompletionRequest parseCompletion(const std::string &body) {
  CompletionRequest r;
  nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    r.error = "the body is not a JSON object";
    return r;
  }
  if (auto it = j.find("max_tokens"); it != j.end()) {
    if (!it->is_number_integer() || it->get<int64_t>() < 1 ||
        it->get<int64_t>() > 1000000) {
      r.error = "max_tokens must be an integer in [1, 1000000]";
      return r;
    }
    r.maxTokens = it->get<int64_t>();
  }
  if (auto it = j.find("prompt"); it != j.end() && it->is_array())
    r.promptTokens = int64_t(it->size());
  if (auto it = j.find("model"); it != j.end() && it->is_string())
    r.model = it->get<std::string>();
  return r;
}

inline std::string errorJson(const std::string &message) {
  return nlohmann::json{{"error",
                         {{"message", message},
                          {"type", "invalid_request_error"},
                          {"code", nullptr}}}}
      .dump();
}

inline std::string modelsJson() {
  return R"({"object":"list","data":[{"id":"mock","object":"model",)"
         R"("created":0,"owned_by":"kiln-bench","max_model_len":1000000}]})";
}

/// The SSE events of one completion stream, as kiln-serve writes them.
class SseStream {
public:
  SseStream(int64_t id, std::string model)
      : head_(R"({"id":"cmpl-)" + std::to_string(id) +
              R"(","object":"text_completion","created":)" +
              std::to_string(std::time(nullptr)) + R"(,"model":)" +
              nlohmann::json(model).dump()) {}

  /// One token's chunk.
  std::string token() const {
    return "data: " + head_ +
           R"(,"choices":[{"index":0,"text":"tok ","logprobs":null,)"
           R"("finish_reason":null}],"usage":null})"
           "\n\n";
  }

  /// The finish chunk, the usage chunk and [DONE].
  std::string end(int64_t promptTokens, int64_t completionTokens) const {
    return "data: " + head_ +
           R"(,"choices":[{"index":0,"text":"","logprobs":null,)"
           R"("finish_reason":"length"}],"usage":null})"
           "\n\n"
           "data: " +
           head_ + R"(,"choices":[],"usage":{"prompt_tokens":)" +
           std::to_string(promptTokens) + R"(,"completion_tokens":)" +
           std::to_string(completionTokens) + R"(,"total_tokens":)" +
           std::to_string(promptTokens + completionTokens) +
           R"(,"prompt_tokens_details":{"cached_tokens":0}}})"
           "\n\n"
           "data: [DONE]\n\n";
  }

private:
  std::string head_;
};

/// --name VALUE flags with integer values, the rest as they are.
struct Flags {
  std::string host = "127.0.0.1", portFile;
  int64_t port = 0, intervalMs = 20, threads = 0, backlog = 0;
};

/// Parses argv; prints `usage` and exits on -h or a bad flag.
inline Flags parseFlags(int argc, char **argv, const char *usage) {
  Flags f;
  auto fail = [&](const std::string &m) {
    std::fprintf(stderr, "%s\n%s", m.c_str(), usage);
    std::exit(2);
  };
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      std::fputs(usage, stdout);
      std::exit(0);
    }
    if (i + 1 >= argc)
      fail("unknown flag or missing value: " + a);
    std::string v = argv[++i];
    auto number = [&](int64_t lo, int64_t hi) {
      char *end = nullptr;
      long long n = std::strtoll(v.c_str(), &end, 10);
      if (v.empty() || *end || n < lo || n > hi)
        fail(a + ": '" + v + "' is not an integer in [" + std::to_string(lo) +
             ", " + std::to_string(hi) + "]");
      return int64_t(n);
    };
    if (a == "--host")
      f.host = v;
    else if (a == "--port")
      f.port = number(0, 65535);
    else if (a == "--port-file")
      f.portFile = v;
    else if (a == "--interval-ms")
      f.intervalMs = number(1, 10000);
    else if (a == "--threads")
      f.threads = number(1, 65536);
    else if (a == "--backlog")
      f.backlog = number(1, 65536);
    else
      fail("unknown flag: " + a);
  }
  return f;
}

} // namespace kiln::bench

#endif // KILN_BENCH_HTTP_SSE_MOCKENGINE_H
