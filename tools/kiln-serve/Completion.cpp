//===- Completion.cpp -----------------------------------------------------===//

#include "tools/kiln-serve/Completion.h"

#include <algorithm>
#include <chrono>

using namespace kiln;
using namespace kiln::serve;

namespace {

std::string dump(const api::Json &j) {
  return j.dump(-1, ' ', false, api::Json::error_handler_t::replace);
}

std::string sse(const api::Json &j) { return "data: " + dump(j) + "\n\n"; }

} // namespace

double kiln::serve::steadySeconds() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

int64_t kiln::serve::unixSeconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

http::Response kiln::serve::jsonResponse(int status, const api::Json &j) {
  http::Response r;
  r.status = status;
  r.body = dump(j);
  return r;
}

http::Response kiln::serve::errorResponse(const api::ApiError &e) {
  return jsonResponse(e.status, e.body());
}

Completion::Completion(api::Route route, api::ApiRequest request,
                       const api::ApiContext &ctx, EngineLoop &loop,
                       api::ServerMetrics &metrics, double arrival)
    : route_(route), request_(std::move(request)), ctx_(ctx), loop_(loop),
      metrics_(metrics), arrival_(arrival),
      stops_(loop.stopIdsFor(request_.params)),
      decoder_(ctx.tokenizer ? std::make_unique<StreamDecoder>(*ctx.tokenizer)
                             : nullptr),
      parser_(request_.output) {
  for (const std::string &s : request_.params.stopStrings)
    holdback_ = std::max(holdback_, s.empty() ? 0 : s.size() - 1);
}

http::Response Completion::start() {
  std::shared_ptr<Completion> self = shared_from_this();
  Result<RequestId> id = loop_.submit(
      request_.params,
      [self](int32_t token, const TokenLogprob *lp) {
        self->onToken(token, lp);
      },
      [self](const RequestOutput &out) { self->onFinish(out); });
  if (!id.isOk()) {
    const bool down = id.status().code() == StatusCode::Unavailable;
    return errorResponse({down ? 503 : 400, id.status().message()});
  }
  id_ = *id;
  rid_ = (route_ == api::Route::Completions ? "cmpl-" : "chatcmpl-") +
         std::to_string(id_);
  created_ = unixSeconds();
  // The parser is built before the id is known: tool call ids carry it.
  request_.output.idPrefix = "call_" + std::to_string(id_) + "_";
  parser_ = api::GlmOutputParser(request_.output);
  http::Response r;
  r.pending = self;
  r.stream = request_.stream;
  if (r.stream) {
    r.contentType = "text/event-stream";
    r.headers = {{"Cache-Control", "no-cache"}};
  }
  return r;
}

void Completion::onToken(int32_t token, const TokenLogprob *logprob) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (firstTokenT_ < 0)
      firstTokenT_ = steadySeconds();
    // A stop id ends the text; it is not part of it (as in the output).
    if (std::find(stops_.begin(), stops_.end(), token) != stops_.end())
      return;
    if (decoder_)
      if (Result<std::string> piece = decoder_->push(token); piece.isOk())
        text_ += *piece;
    ids_.push_back(token);
    if (logprob)
      logprobs_.push_back(*logprob);
  }
  wake();
}

void Completion::onFinish(const RequestOutput &out) {
  double ttft;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ttft = firstTokenT_;
  }
  // Counted before the reply can end: a client that reads /metrics once its
  // response is complete sees its own request there.
  metrics_.observe(out, ttft < 0 ? -1.0 : ttft - arrival_,
                   steadySeconds() - arrival_);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    out_ = out;
    done_ = true;
  }
  wake();
}

bool Completion::poll(std::string &out) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (request_.stream)
    return pollStream(out);
  if (!done_)
    return false;
  if (out_.finish == FinishReason::Error) {
    status = 500;
    out = dump(api::ApiError{500, out_.error, "server_error"}.body());
    return true;
  }
  api::Output o;
  o.out = &out_;
  o.tokens = ids_.size();
  if (route_ == api::Route::Chat)
    o.parsed = api::GlmOutputParser::parse(out_.text, request_.output);
  out = dump(api::response(route_, rid_, created_, ctx_.servedModel, o,
                           ctx_.tokenizer));
  return true;
}

api::OutputDelta Completion::delta(const std::string &piece, bool last) {
  api::OutputDelta d;
  if (route_ == api::Route::Completions) {
    d.content = piece;
    return d;
  }
  d = parser_.push(piece);
  if (last) {
    api::OutputDelta rest = parser_.finish();
    d.reasoning += rest.reasoning;
    d.content += rest.content;
    d.toolCalls.insert(d.toolCalls.end(), rest.toolCalls.begin(),
                       rest.toolCalls.end());
  }
  return d;
}

api::Json Completion::pendingLogprobs() {
  api::Json lp = api::logprobs(route_, ctx_.tokenizer, ids_, logprobs_, lpSent_,
                               ids_.size(), textOffset_);
  for (size_t i = lpSent_; ctx_.tokenizer && i < ids_.size(); ++i)
    if (Result<std::string> t = ctx_.tokenizer->decode(&ids_[i], 1); t.isOk())
      textOffset_ += int64_t(t->size());
  lpSent_ = ids_.size();
  return lp;
}

bool Completion::pollStream(std::string &out) {
  const std::string &model = ctx_.servedModel;
  if (done_) {
    if (out_.finish == FinishReason::Error) {
      out += sse(api::ApiError{500, out_.error, "server_error"}.body());
    } else {
      std::string rest =
          out_.text.size() > sent_ ? out_.text.substr(sent_) : std::string();
      api::OutputDelta d = delta(rest, /*last=*/true);
      api::Json lp = pendingLogprobs();
      if (!d.empty() || first_ || !lp.is_null())
        out += sse(
            api::chunk(route_, rid_, created_, model, d, nullptr, first_, lp));
      first_ = false;
      const char *finish =
          api::finishReason(out_, !parser_.result().toolCalls.empty());
      out += sse(api::chunk(route_, rid_, created_, model, {}, finish, false,
                            nullptr));
      if (request_.includeUsage)
        out += sse(api::usageChunk(route_, rid_, created_, model, out_));
    }
    out += "data: [DONE]\n\n";
    return true;
  }
  if (text_.size() <= sent_ + holdback_)
    return false;
  const size_t end = text_.size() - holdback_;
  api::OutputDelta d = delta(text_.substr(sent_, end - sent_), false);
  sent_ = end;
  api::Json lp = pendingLogprobs();
  if (!d.empty() || !lp.is_null()) {
    out +=
        sse(api::chunk(route_, rid_, created_, model, d, nullptr, first_, lp));
    first_ = false;
  }
  return false;
}
