//===- OpenAiApi.cpp ------------------------------------------------------===//

#include "tools/kiln-serve/OpenAiApi.h"

using namespace kiln;
using namespace kiln::serve;
using namespace kiln::serve::api;
using nlohmann::json;

json ApiError::body() const {
  return {{"error",
           {{"message", message},
            {"type", type},
            {"param", nullptr},
            {"code", code.empty() ? json(nullptr) : json(code)}}}};
}

namespace {

/// Field `name` of `j` as T, or the error naming it.
template <typename T>
bool field(const json &j, const char *name, T &out, ApiError &error,
           bool (json::*is)() const) {
  if (!j.contains(name) || j[name].is_null())
    return true;
  if (!(j[name].*is)()) {
    error = {400, std::string("'") + name + "' has the wrong type"};
    return false;
  }
  out = j[name].get<T>();
  return true;
}

bool refuse(ApiError &error, const std::string &message, int status = 400,
            const char *code = "") {
  error = {status, message};
  error.code = code;
  if (status == 404)
    error.type = "NotFoundError";
  return false;
}

bool tokenIds(const json &v, std::vector<int32_t> &out, ApiError &error) {
  for (const json &t : v) {
    if (!t.is_number_integer())
      return refuse(error, "'prompt' token ids must be integers");
    int64_t id = t.get<int64_t>();
    if (id < 0 || id > INT32_MAX)
      return refuse(error, "'prompt' token id " + std::to_string(id) +
                               " is out of range");
    out.push_back(int32_t(id));
  }
  return true;
}

bool parsePrompt(Route route, const json &j, const ApiContext &ctx,
                 RequestParams &p, ApiError &error) {
  if (route == Route::Completions) {
    if (!j.contains("prompt"))
      return refuse(error, "'prompt' is required");
    const json &v = j["prompt"];
    if (v.is_array() && v.size() == 1 && (v[0].is_string() || v[0].is_array()))
      return parsePrompt(route, json{{"prompt", v[0]}}, ctx, p, error);
    if (v.is_array())
      return tokenIds(v, p.prompt, error);
    if (!v.is_string())
      return refuse(error, "'prompt' must be a string or a list of token ids");
    if (!ctx.tokenizer)
      return refuse(error, "the model has no tokenizer: send token ids");
    Result<std::vector<int32_t>> ids =
        ctx.tokenizer->encode(v.get<std::string>(), /*parseSpecial=*/true);
    if (!ids.isOk())
      return refuse(error, ids.status().message());
    p.prompt = std::move(ids).value();
    return true;
  }
  if (!j.contains("messages") || !j["messages"].is_array() ||
      j["messages"].empty())
    return refuse(error, "'messages' must be a non-empty list");
  if (!ctx.tokenizer)
    return refuse(error, "the model has no tokenizer: chat needs one");
  std::vector<ChatMessage> messages;
  for (const json &m : j["messages"]) {
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string())
      return refuse(error, "each message needs a string 'role'");
    std::string role = m["role"].get<std::string>();
    if (role == "tool")
      role = "observation";
    if (role != "system" && role != "user" && role != "assistant" &&
        role != "observation")
      return refuse(error, "unknown message role '" + role + "'");
    std::string content;
    if (m.contains("content") && m["content"].is_string()) {
      content = m["content"].get<std::string>();
    } else if (m.contains("content") && m["content"].is_array()) {
      for (const json &part : m["content"])
        if (part.is_object() && part.value("type", "") == "text" &&
            part.contains("text") && part["text"].is_string())
          content += part["text"].get<std::string>();
    } else if (m.contains("content") && !m["content"].is_null()) {
      return refuse(error, "message 'content' must be a string or a list");
    }
    messages.push_back({role, content});
  }
  bool thinking = true;
  if (j.contains("chat_template_kwargs") &&
      j["chat_template_kwargs"].is_object() &&
      j["chat_template_kwargs"].contains("enable_thinking")) {
    const json &t = j["chat_template_kwargs"]["enable_thinking"];
    if (!t.is_boolean())
      return refuse(error, "'enable_thinking' must be a boolean");
    thinking = t.get<bool>();
  }
  Result<std::vector<int32_t>> ids = ctx.tokenizer->encodeChat(
      messages, /*addGenerationPrompt=*/true, thinking);
  if (!ids.isOk())
    return refuse(error, ids.status().message());
  p.prompt = std::move(ids).value();
  return true;
}

} // namespace

ApiRequest api::parseRequest(Route route, const std::string &body,
                             const ApiContext &ctx, ApiError &error) {
  ApiRequest r;
  error = {0, ""};
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    refuse(error, "the request body is not valid JSON");
    return r;
  }
  if (!j.is_object()) {
    refuse(error, "the request body must be a JSON object");
    return r;
  }
  RequestParams &p = r.params;
  // OpenAI's defaults: temperature 1, 16 tokens for completions; chat runs
  // to the end of the context unless told.
  p.sampling.temperature = 1.0f;
  p.maxTokens = route == Route::Completions ? 16 : 0;
  double temperature = 1.0, topP = 1.0;
  int64_t topK = 0, maxTokens = -1, maxCompletion = -1, n = 1;
  uint64_t seed = 0;
  bool ok =
      field(j, "model", r.model, error, &json::is_string) &&
      field(j, "stream", r.stream, error, &json::is_boolean) &&
      field(j, "temperature", temperature, error, &json::is_number) &&
      field(j, "top_p", topP, error, &json::is_number) &&
      field(j, "top_k", topK, error, &json::is_number_integer) &&
      field(j, "seed", seed, error, &json::is_number_unsigned) &&
      field(j, "max_tokens", maxTokens, error, &json::is_number_integer) &&
      field(j, "max_completion_tokens", maxCompletion, error,
            &json::is_number_integer) &&
      field(j, "n", n, error, &json::is_number_integer) &&
      field(j, "ignore_eos", p.ignoreEos, error, &json::is_boolean);
  if (!ok)
    return r;
  if (!r.model.empty() && r.model != ctx.servedModel) {
    refuse(error,
           "the model '" + r.model + "' does not exist (this server serves '" +
               ctx.servedModel + "')",
           404, "model_not_found");
    return r;
  }
  if (n != 1) {
    refuse(error, "'n' must be 1 (one choice per request)");
    return r;
  }
  if (j.contains("logprobs") && !j["logprobs"].is_null() &&
      !(j["logprobs"].is_boolean() && !j["logprobs"].get<bool>())) {
    refuse(error, "'logprobs' is not supported yet");
    return r;
  }
  if (j.contains("tools") && !j["tools"].is_null() && !j["tools"].empty()) {
    refuse(error, "'tools' is not supported yet");
    return r;
  }
  if (j.contains("stream_options") && j["stream_options"].is_object())
    field(j["stream_options"], "include_usage", r.includeUsage, error,
          &json::is_boolean);
  if (error.status)
    return r;
  if (j.contains("stop") && !j["stop"].is_null()) {
    const json &s = j["stop"];
    if (s.is_string()) {
      p.stopStrings = {s.get<std::string>()};
    } else if (s.is_array()) {
      for (const json &x : s) {
        if (!x.is_string()) {
          refuse(error, "'stop' must be a string or a list of strings");
          return r;
        }
        p.stopStrings.push_back(x.get<std::string>());
      }
    } else {
      refuse(error, "'stop' must be a string or a list of strings");
      return r;
    }
  }
  p.sampling.temperature = float(temperature);
  p.sampling.topP = float(topP);
  p.sampling.topK = topK == -1 ? 0 : topK; // -1: off, as vLLM has it
  p.sampling.seed = seed;
  if (Status s = p.sampling.check(); !s.isOk()) {
    refuse(error, s.message());
    return r;
  }
  if (!parsePrompt(route, j, ctx, p, error))
    return r;
  int64_t limit = maxCompletion >= 0 ? maxCompletion : maxTokens;
  if (limit == 0 || limit < -1) {
    refuse(error, "'max_tokens' must be at least 1");
    return r;
  }
  if (limit > 0)
    p.maxTokens = limit;
  if (p.maxTokens == 0) // chat without a limit: the rest of the context
    p.maxTokens =
        ctx.maxPositions > 0
            ? std::max<int64_t>(1, ctx.maxPositions - int64_t(p.prompt.size()))
            : 1024;
  return r;
}

json api::usage(const RequestOutput &out) {
  int64_t prompt = int64_t(out.prompt.size()),
          completion = int64_t(out.ids.size());
  return {{"prompt_tokens", prompt},
          {"completion_tokens", completion},
          {"total_tokens", prompt + completion},
          {"prompt_tokens_details", {{"cached_tokens", out.cachedTokens}}}};
}

static const char *finishName(const RequestOutput &out) {
  return out.finish == FinishReason::Length ? "length" : "stop";
}

json api::response(Route route, const std::string &id, int64_t created,
                   const std::string &model, const RequestOutput &out) {
  json choice = {{"index", 0}, {"finish_reason", finishName(out)}};
  if (route == Route::Completions) {
    choice["text"] = out.text;
    choice["logprobs"] = nullptr;
  } else {
    choice["message"] = {{"role", "assistant"}, {"content", out.text}};
  }
  return {{"id", id},
          {"object",
           route == Route::Completions ? "text_completion" : "chat.completion"},
          {"created", created},
          {"model", model},
          {"choices", json::array({choice})},
          {"usage", usage(out)}};
}

json api::chunk(Route route, const std::string &id, int64_t created,
                const std::string &model, const std::string &text,
                const char *finish, bool first) {
  json choice = {{"index", 0},
                 {"finish_reason", finish ? json(finish) : json(nullptr)}};
  if (route == Route::Completions) {
    choice["text"] = text;
    choice["logprobs"] = nullptr;
  } else {
    json delta = json::object();
    if (first)
      delta["role"] = "assistant";
    if (!text.empty() || (first && !finish))
      delta["content"] = text;
    choice["delta"] = delta;
  }
  return {{"id", id},
          {"object", route == Route::Completions ? "text_completion"
                                                 : "chat.completion.chunk"},
          {"created", created},
          {"model", model},
          {"choices", json::array({choice})},
          {"usage", nullptr}};
}

json api::usageChunk(Route route, const std::string &id, int64_t created,
                     const std::string &model, const RequestOutput &out) {
  return {{"id", id},
          {"object", route == Route::Completions ? "text_completion"
                                                 : "chat.completion.chunk"},
          {"created", created},
          {"model", model},
          {"choices", json::array()},
          {"usage", usage(out)}};
}
