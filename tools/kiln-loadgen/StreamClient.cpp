//===- StreamClient.cpp - One request to an OpenAI-compatible server ------===//
//
// One httplib::Client per request, so the requests of a run share nothing
// and each thread times its own chunks. The body is read through a content
// receiver, which sees the bytes as they arrive; for a status other than
// 200 it keeps the body for the error message instead.
//
//===----------------------------------------------------------------------===//

#include "tools/kiln-loadgen/StreamClient.h"

#include <httplib.h>
#include <nlohmann/json.hpp>

using namespace kiln::loadgen;
using nlohmann::json;

namespace {

double seconds(Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

std::string clip(const std::string &s, size_t n = 200) {
  return s.size() <= n ? s : s.substr(0, n) + "...";
}

/// "http://host:port/prefix" -> ("http://host:port", "/prefix").
std::pair<std::string, std::string> splitUrl(const std::string &url) {
  size_t scheme = url.find("://");
  size_t slash = url.find('/', scheme == std::string::npos ? 0 : scheme + 3);
  if (slash == std::string::npos)
    return {url, ""};
  std::string prefix = url.substr(slash);
  while (!prefix.empty() && prefix.back() == '/')
    prefix.pop_back();
  return {url.substr(0, slash), prefix};
}

/// A client for `t`, or null when the URL is not one httplib takes.
std::unique_ptr<httplib::Client> client(const Target &t) {
  std::unique_ptr<httplib::Client> c;
  try { // httplib throws on a scheme it does not know
    c = std::make_unique<httplib::Client>(splitUrl(t.baseUrl).first);
  } catch (const std::exception &) {
    return nullptr;
  }
  if (!c->is_valid())
    return nullptr;
  auto timeout = std::chrono::duration<double>(t.timeoutS);
  c->set_connection_timeout(timeout);
  c->set_read_timeout(timeout);
  c->set_write_timeout(timeout);
  c->set_keep_alive(false);
  return c;
}

httplib::Headers headers(const Target &t) {
  httplib::Headers h;
  if (!t.apiKey.empty())
    h.emplace("Authorization", "Bearer " + t.apiKey);
  return h;
}

std::string stringField(const json &j, const char *key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

int64_t intField(const json &j, const char *key) {
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<int64_t>() : 0;
}

/// The error message of an OpenAI error body (or of FastAPI's "detail").
std::string errorMessage(const json &j) {
  if (!j.is_object())
    return "";
  auto e = j.find("error");
  if (e != j.end() && e->is_object())
    return stringField(*e, "message");
  if (e != j.end() && e->is_string())
    return e->get<std::string>();
  std::string m = stringField(j, "message");
  return m.empty() ? stringField(j, "detail") : m;
}

/// The text a chunk carries: completions' `text`, chat's `delta.content`,
/// or reasoning text (sglang's `reasoning_content`, vLLM's `reasoning`),
/// which counts toward TTFT as in sglang's client.
std::string chunkText(const json &choice) {
  if (!choice.is_object())
    return "";
  std::string text = stringField(choice, "text");
  auto delta = choice.find("delta");
  if (text.empty() && delta != choice.end() && delta->is_object())
    for (const char *key : {"content", "reasoning_content", "reasoning"})
      if (text = stringField(*delta, key); !text.empty())
        break;
  return text;
}

/// httplib's error, in words.
std::string errorText(httplib::Error e) {
  switch (e) {
  case httplib::Error::Connection:
    return "could not connect";
  case httplib::Error::ConnectionTimeout:
    return "the connection timed out";
  case httplib::Error::Read:
    return "reading the response failed or timed out";
  case httplib::Error::Write:
    return "sending the request failed or timed out";
  case httplib::Error::Canceled:
    return "cancelled";
  case httplib::Error::SSLConnection:
  case httplib::Error::SSLLoadingCerts:
  case httplib::Error::SSLServerVerification:
    return "TLS failed (" + httplib::to_string(e) + ")";
  default:
    return "failed (" + httplib::to_string(e) + ")";
  }
}

} // namespace

std::string HttpReply::describe() const {
  if (!error.empty())
    return error;
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  std::string m = j.is_discarded() ? "" : errorMessage(j);
  return "HTTP " + std::to_string(status) + ": " + (m.empty() ? clip(body) : m);
}

namespace {

HttpReply reply(const httplib::Result &r, const std::string &what) {
  HttpReply out;
  if (!r) {
    out.error = what + ": " + errorText(r.error());
    return out;
  }
  out.status = r->status;
  out.body = r->body;
  return out;
}

} // namespace

HttpReply kiln::loadgen::httpGet(const Target &t, const std::string &path) {
  std::unique_ptr<httplib::Client> c = client(t);
  if (!c)
    return HttpReply{0, "", "'" + t.baseUrl + "' is not an http(s) URL"};
  std::string full = splitUrl(t.baseUrl).second + path;
  return reply(c->Get(full, headers(t)), "GET " + t.baseUrl + path);
}

HttpReply kiln::loadgen::httpPost(const Target &t, const std::string &path,
                                  const std::string &body) {
  std::unique_ptr<httplib::Client> c = client(t);
  if (!c)
    return HttpReply{0, "", "'" + t.baseUrl + "' is not an http(s) URL"};
  std::string full = splitUrl(t.baseUrl).second + path;
  return reply(c->Post(full, headers(t), body, "application/json"),
               "POST " + t.baseUrl + path);
}

bool SseParser::feed(const char *bytes, size_t n) {
  buffer_.append(bytes, n);
  size_t start = 0, end;
  bool go = true;
  while (go && (end = buffer_.find('\n', start)) != std::string::npos) {
    go = line(buffer_.substr(start, end - start));
    start = end + 1;
  }
  buffer_.erase(0, start);
  return go;
}

bool SseParser::finish() {
  if (!buffer_.empty() && !line(std::move(buffer_)))
    return false;
  buffer_.clear();
  return line("");
}

bool SseParser::line(std::string l) {
  if (!l.empty() && l.back() == '\r')
    l.pop_back();
  if (l.empty()) { // the end of an event
    if (!hasData_)
      return true;
    hasData_ = false;
    return onData_(std::exchange(data_, std::string()));
  }
  if (l[0] == ':') // a comment: keep-alive pings
    return true;
  size_t colon = l.find(':');
  if (l.compare(0, colon, "data") != 0)
    return true; // event:, id:, retry: carry nothing measured
  std::string value = colon == std::string::npos ? "" : l.substr(colon + 1);
  if (!value.empty() && value[0] == ' ')
    value.erase(0, 1);
  if (hasData_)
    data_ += '\n';
  data_ += value;
  hasData_ = true;
  return true;
}

RequestRecord kiln::loadgen::streamRequest(const Target &t,
                                           const std::string &path,
                                           const std::string &body,
                                           int64_t promptLen,
                                           Clock::time_point runStart) {
  RequestRecord rec;
  const Clock::time_point t0 = Clock::now();
  rec.sendS = seconds(t0 - runStart);
  auto since = [&] { return seconds(Clock::now() - t0); };
  std::unique_ptr<httplib::Client> c = client(t);
  if (!c) {
    rec.error = "'" + t.baseUrl + "' is not an http(s) URL";
    return rec;
  }

  int status = 0;
  std::string errorBody, failure;
  bool done = false, tokensKnown = true;
  double firstChoiceS = -1, endS = -1;
  int64_t lastCompletion = 0;
  SseParser sse([&](const std::string &data) {
    const double now = since();
    if (data == "[DONE]") {
      done = true;
      endS = now;
      return true;
    }
    json j = json::parse(data, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) {
      failure = "malformed event: " + clip(data);
      return false;
    }
    if (j.contains("error")) {
      std::string m = errorMessage(j);
      failure = "error event: " + (m.empty() ? clip(data) : m);
      return false;
    }
    int64_t completion = -1;
    auto usage = j.find("usage");
    if (usage != j.end() && usage->is_object()) {
      rec.usage = true;
      rec.promptTokens = intField(*usage, "prompt_tokens");
      completion = rec.completionTokens = intField(*usage, "completion_tokens");
      auto details = usage->find("prompt_tokens_details");
      if (details != usage->end() && details->is_object())
        rec.cachedTokens = intField(*details, "cached_tokens");
    }
    auto choices = j.find("choices");
    if (choices != j.end() && choices->is_array() && !choices->empty()) {
      if (firstChoiceS < 0)
        firstChoiceS = now;
      if (!chunkText((*choices)[0]).empty()) {
        rec.chunkS.push_back(now);
        if (completion >= 0)
          rec.chunkTokens.push_back(completion - lastCompletion);
        else
          tokensKnown = false;
      }
    }
    if (completion >= 0)
      lastCompletion = completion;
    return true;
  });

  httplib::Request req;
  req.method = "POST";
  req.path = splitUrl(t.baseUrl).second + path;
  req.headers = headers(t);
  req.headers.emplace("Content-Type", "application/json");
  req.headers.emplace("Accept", "text/event-stream");
  req.headers.emplace("Accept-Encoding", "identity"); // chunks as sent
  req.body = body;
  req.response_handler = [&](const httplib::Response &r) {
    status = r.status;
    return true;
  };
  req.content_receiver = [&](const char *d, size_t n, uint64_t, uint64_t) {
    if (since() > t.timeoutS) {
      failure = "timed out after " + std::to_string(int64_t(t.timeoutS)) + " s";
      return false;
    }
    if (status != 200) {
      if (errorBody.size() < (64u << 10))
        errorBody.append(d, n);
      return true;
    }
    return sse.feed(d, n);
  };
  httplib::Response res;
  httplib::Error err = httplib::Error::Success;
  bool answered = c->send(req, res, err);
  if (failure.empty() && answered && status == 200)
    sse.finish();
  rec.e2eS = endS >= 0 ? endS : since();

  if (!failure.empty())
    rec.error = failure;
  else if (!answered && status == 0)
    rec.error = "POST " + t.baseUrl + path + ": " + errorText(err);
  else if (status != 200)
    rec.error = HttpReply{status, errorBody, ""}.describe();
  else if (!answered)
    rec.error = "the stream broke: " + errorText(err);
  else if (!done)
    rec.error = "the stream ended without data: [DONE]";
  else if (firstChoiceS < 0)
    rec.error = "the stream carried no choices";
  if (!rec.error.empty())
    return rec;

  // No text at all (every token decoded to nothing): the first chunk with
  // choices stands in, as vLLM's client times it.
  rec.ttftS = rec.chunkS.empty() ? firstChoiceS : rec.chunkS.front();
  if (!tokensKnown)
    rec.chunkTokens.clear();
  if (!rec.usage) {
    rec.promptTokens = promptLen;
    rec.completionTokens = int64_t(rec.chunkS.size());
  }
  rec.ok = true;
  return rec;
}
