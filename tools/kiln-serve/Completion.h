//===- Completion.h - One completion request, engine to HTTP body -*- C++
//-*-===//
//
// A /v1/completions or /v1/chat/completions request from submission to its
// last byte: the engine thread hands it tokens (decoded text, logprobs) and
// the end, and wakes the HTTP session, which polls it for the body: whole
// JSON once finished, or Server-Sent Events as text arrives (text that could
// start a stop string held back; chat text through the GLM parser).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TOOLS_KILN_SERVE_COMPLETION_H
#define KILN_TOOLS_KILN_SERVE_COMPLETION_H

#include "runtime/serve/EngineLoop.h"
#include "tools/kiln-serve/HttpServer.h"
#include "tools/kiln-serve/OpenAiApi.h"
#include "tools/kiln-serve/ServerMetrics.h"

#include <memory>
#include <mutex>

namespace kiln::serve {

class Completion : public http::Pending,
                   public std::enable_shared_from_this<Completion> {
public:
  Completion(api::Route route, api::ApiRequest request,
             const api::ApiContext &ctx, EngineLoop &loop,
             api::ServerMetrics &metrics, double arrival);

  /// Submits the request; the HTTP response (its body pending), or the
  /// refusal as an OpenAI error.
  http::Response start();

  bool poll(std::string &out) override;
  void closed() override { loop_.cancel(id_); }

private:
  void onToken(int32_t token, const TokenLogprob *logprob);
  void onFinish(const RequestOutput &out);
  api::OutputDelta delta(const std::string &piece, bool last);
  api::Json pendingLogprobs();
  bool pollStream(std::string &out);

  const api::Route route_;
  api::ApiRequest request_;
  const api::ApiContext &ctx_;
  EngineLoop &loop_;
  api::ServerMetrics &metrics_;
  const double arrival_;
  std::vector<int32_t> stops_;
  std::unique_ptr<StreamDecoder> decoder_; // engine thread only
  RequestId id_ = -1;
  std::string rid_;
  int64_t created_ = 0;
  size_t holdback_ = 0; // bytes that could start a stop string

  // Written by the engine thread, read by the session; guarded.
  std::mutex mutex_;
  std::string text_; // decoded (stop ids left out)
  std::vector<int32_t> ids_;
  std::vector<TokenLogprob> logprobs_;
  bool done_ = false;
  RequestOutput out_;
  double firstTokenT_ = -1;

  // The session's progress (its strand only).
  size_t sent_ = 0, lpSent_ = 0;
  int64_t textOffset_ = 0;
  bool first_ = true;
  api::GlmOutputParser parser_;
};

/// Seconds on a steady clock.
double steadySeconds();
/// Seconds since the Unix epoch (OpenAI's `created`).
int64_t unixSeconds();

/// JSON as the body of a response with `status`.
http::Response jsonResponse(int status, const api::Json &j);
/// An OpenAI error object with its status.
http::Response errorResponse(const api::ApiError &e);

} // namespace kiln::serve

#endif // KILN_TOOLS_KILN_SERVE_COMPLETION_H
