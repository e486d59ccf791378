//===- OpenAiApi.cpp ------------------------------------------------------===//

#include "tools/kiln-serve/OpenAiApi.h"

using namespace kiln;
using namespace kiln::serve;
using namespace kiln::serve::api;
using json = kiln::serve::api::Json;

Json ApiError::body() const {
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

/// `j[key]` is the string `want` (json::value() would throw on another
/// type).
bool isString(const json &j, const char *key, const char *want) {
  return j.contains(key) && j[key].is_string() && j[key] == want;
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
                 ApiRequest &r, ApiError &error) {
  RequestParams &p = r.params;
  if (route == Route::Completions) {
    if (!j.contains("prompt"))
      return refuse(error, "'prompt' is required");
    const json &v = j["prompt"];
    if (v.is_array() && v.size() == 1 && (v[0].is_string() || v[0].is_array()))
      return parsePrompt(route, json{{"prompt", v[0]}}, ctx, r, error);
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
  ChatPrompt chat;
  if (!parseChat(j, chat, error))
    return false;
  if (!ctx.tokenizer)
    return refuse(error, "the model has no tokenizer: chat needs one");
  Result<std::vector<int32_t>> ids = ctx.tokenizer->encodeChat(
      chat.messages, /*addGenerationPrompt=*/true, chat.thinking, chat.tools);
  if (!ids.isOk())
    return refuse(error, ids.status().message());
  p.prompt = std::move(ids).value();
  GlmOutputOptions &o = r.output;
  o.reasoning = chat.thinking;
  o.tools = chat.parseTools;
  o.specs = chat.specs;
  // A template whose generation prompt opens <think> starts the output
  // inside the reasoning.
  Result<int32_t> think =
      ctx.tokenizer->tokenToId(ctx.tokenizer->data().chat.thinkOpen);
  o.startInReasoning = think.isOk() && p.prompt.back() == *think;
  return true;
}

/// The text of a message content: a string, or the text parts of a list.
bool contentText(const json &m, const char *what, std::string &out,
                 ApiError &error) {
  if (!m.contains("content") || m["content"].is_null())
    return true;
  const json &c = m["content"];
  if (c.is_string()) {
    out = c.get<std::string>();
    return true;
  }
  if (!c.is_array())
    return refuse(error,
                  std::string(what) + " 'content' must be a string or a list");
  for (const json &part : c)
    if (part.is_string())
      out += part.get<std::string>();
    else if (part.is_object() && isString(part, "type", "text") &&
             part.contains("text") && part["text"].is_string())
      out += part["text"].get<std::string>();
  return true;
}

/// An earlier assistant turn's tool call, arguments as the template prints
/// them.
bool historyToolCall(const json &tc, ChatToolCall &out, ApiError &error) {
  const json &f =
      tc.is_object() && tc.contains("function") ? tc["function"] : tc;
  if (!f.is_object() || !f.contains("name") || !f["name"].is_string())
    return refuse(error, "each tool call needs a 'function' with a 'name'");
  out.name = f["name"].get<std::string>();
  json args = json::object();
  if (f.contains("arguments") && f["arguments"].is_string()) {
    std::string text = f["arguments"].get<std::string>();
    args = text.empty() ? json::object() : json::parse(text, nullptr, false);
  } else if (f.contains("arguments") && !f["arguments"].is_null()) {
    args = f["arguments"];
  }
  if (!args.is_object())
    return refuse(error, "tool call '" + out.name +
                             "': 'arguments' must be a JSON object");
  for (auto it = args.begin(); it != args.end(); ++it)
    out.arguments.push_back({it.key(), it.value().is_string()
                                           ? it.value().get<std::string>()
                                           : pythonJson(it.value())});
  return true;
}

/// Completions: `logprobs: N` (top N). Chat: `logprobs: true` and
/// `top_logprobs: N`. N is 0 to 20, as OpenAI allows.
bool parseLogprobs(Route route, const json &j, int32_t &out, ApiError &error) {
  const json *v = j.contains("logprobs") && !j["logprobs"].is_null()
                      ? &j["logprobs"]
                      : nullptr;
  const json *top = j.contains("top_logprobs") && !j["top_logprobs"].is_null()
                        ? &j["top_logprobs"]
                        : nullptr;
  auto count = [&](const json &n, const char *name) {
    if (!n.is_number_integer() || n.get<int64_t>() < 0 || n.get<int64_t>() > 20)
      return refuse(error, std::string("'") + name +
                               "' must be an integer from 0 to 20");
    out = int32_t(n.get<int64_t>());
    return true;
  };
  if (route == Route::Completions)
    return !v || (v->is_boolean() && !v->get<bool>()) || count(*v, "logprobs");
  if (v && !v->is_boolean())
    return refuse(error, "'logprobs' must be a boolean");
  if (!v || !v->get<bool>())
    return !top || refuse(error, "'top_logprobs' needs 'logprobs': true");
  out = 0;
  return !top || count(*top, "top_logprobs");
}

} // namespace

bool api::parseChat(const json &j, ChatPrompt &chat, ApiError &error) {
  if (!j.contains("messages") || !j["messages"].is_array() ||
      j["messages"].empty())
    return refuse(error, "'messages' must be a non-empty list");
  for (const json &m : j["messages"]) {
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string())
      return refuse(error, "each message needs a string 'role'");
    ChatMessage msg;
    msg.role = m["role"].get<std::string>();
    if (msg.role != "system" && msg.role != "user" && msg.role != "assistant" &&
        msg.role != "tool" && msg.role != "developer")
      return refuse(error, "unknown message role '" + msg.role + "'");
    if (msg.role == "developer") // OpenAI's newer name for system
      msg.role = "system";
    if (!contentText(m, "message", msg.content, error))
      return false;
    if (msg.role == "assistant") {
      if (m.contains("reasoning_content") &&
          m["reasoning_content"].is_string()) {
        msg.hasReasoning = true;
        msg.reasoning = m["reasoning_content"].get<std::string>();
      }
      if (m.contains("tool_calls") && !m["tool_calls"].is_null()) {
        if (!m["tool_calls"].is_array())
          return refuse(error, "'tool_calls' must be a list");
        for (const json &tc : m["tool_calls"]) {
          ChatToolCall call;
          if (!historyToolCall(tc, call, error))
            return false;
          msg.toolCalls.push_back(std::move(call));
        }
      }
    }
    chat.messages.push_back(std::move(msg));
  }
  if (j.contains("chat_template_kwargs") &&
      !j["chat_template_kwargs"].is_null()) {
    const json &k = j["chat_template_kwargs"];
    if (!k.is_object())
      return refuse(error, "'chat_template_kwargs' must be an object");
    if (k.contains("enable_thinking")) {
      if (!k["enable_thinking"].is_boolean())
        return refuse(error, "'enable_thinking' must be a boolean");
      chat.thinking = k["enable_thinking"].get<bool>();
    }
  }
  std::string choice = "auto";
  if (j.contains("tool_choice") && !j["tool_choice"].is_null()) {
    const json &c = j["tool_choice"];
    if (!c.is_string())
      return refuse(error, "'tool_choice' other than \"auto\" or \"none\" "
                           "(a forced call) is not supported");
    choice = c.get<std::string>();
    if (choice != "auto" && choice != "none")
      return refuse(error, "'tool_choice' \"" + choice +
                               "\" is not supported (\"auto\" or \"none\")");
  }
  if (!j.contains("tools") || j["tools"].is_null() || choice == "none")
    return true;
  if (!j["tools"].is_array())
    return refuse(error, "'tools' must be a list");
  for (const json &t : j["tools"]) {
    if (!t.is_object() ||
        (t.contains("type") && !isString(t, "type", "function")) ||
        !t.contains("function") || !t["function"].is_object() ||
        !t["function"].contains("name") || !t["function"]["name"].is_string())
      return refuse(error, "each tool must be {\"type\": \"function\", "
                           "\"function\": {\"name\": ...}}");
    ToolSpec spec;
    spec.name = t["function"]["name"].get<std::string>();
    const json &f = t["function"];
    if (f.contains("parameters") && f["parameters"].is_object() &&
        f["parameters"].contains("properties") &&
        f["parameters"]["properties"].is_object())
      for (auto it = f["parameters"]["properties"].begin();
           it != f["parameters"]["properties"].end(); ++it)
        if (it.value().is_object() && it.value().contains("type") &&
            it.value()["type"].is_string())
          spec.paramTypes[it.key()] = it.value()["type"].get<std::string>();
    chat.specs.push_back(std::move(spec));
    chat.tools.push_back(pythonJson(t));
  }
  chat.parseTools = !chat.tools.empty();
  return true;
}

std::string api::pythonJson(const json &v) {
  const auto replace = json::error_handler_t::replace;
  if (v.is_object()) {
    std::string s = "{";
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (it != v.begin())
        s += ", ";
      s += json(it.key()).dump(-1, ' ', false, replace) + ": " +
           pythonJson(it.value());
    }
    return s + "}";
  }
  if (v.is_array()) {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); ++i)
      s += (i ? ", " : "") + pythonJson(v[i]);
    return s + "]";
  }
  if (v.is_boolean())
    return v.get<bool>() ? "true" : "false";
  return v.dump(-1, ' ', false, replace);
}

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
  if (!parseLogprobs(route, j, p.logprobs, error))
    return r;
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
  if (!parsePrompt(route, j, ctx, r, error))
    return r;
  if (p.prompt.empty()) {
    refuse(error, "'prompt' is empty");
    return r;
  }
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

const char *api::finishReason(const RequestOutput &out, bool toolCalls) {
  if (out.finish == FinishReason::Length)
    return "length";
  return toolCalls ? "tool_calls" : "stop";
}

static const char *objectName(Route route, bool chunk) {
  return route == Route::Completions ? "text_completion"
         : chunk                     ? "chat.completion.chunk"
                                     : "chat.completion";
}

static json toolCallsJson(const std::vector<ToolCall> &calls) {
  json a = json::array();
  for (size_t i = 0; i < calls.size(); ++i)
    a.push_back(
        {{"index", i},
         {"id", calls[i].id},
         {"type", "function"},
         {"function",
          {{"name", calls[i].name}, {"arguments", calls[i].arguments}}}});
  return a;
}

json api::logprobs(Route route, const Tokenizer *tokenizer,
                   const std::vector<int32_t> &ids,
                   const std::vector<TokenLogprob> &lps, size_t from, size_t to,
                   int64_t textOffset) {
  if (lps.empty() || !tokenizer)
    return nullptr;
  to = std::min({to, ids.size(), lps.size()});
  auto text = [&](int32_t id) {
    Result<std::string> t = tokenizer->decode(&id, 1);
    return t.isOk() ? *t : std::string();
  };
  auto bytes = [](const std::string &t) {
    json b = json::array();
    for (unsigned char c : t)
      b.push_back(int(c));
    return b;
  };
  if (route == Route::Completions) {
    json tokens = json::array(), values = json::array(), tops = json::array(),
         offsets = json::array();
    for (size_t i = from; i < to; ++i) {
      std::string t = text(ids[i]);
      tokens.push_back(t);
      values.push_back(lps[i].logprob);
      json top = json::object();
      for (const auto &[id, lp] : lps[i].top)
        top[text(id)] = lp;
      tops.push_back(top);
      offsets.push_back(textOffset);
      textOffset += int64_t(t.size());
    }
    return {{"tokens", tokens},
            {"token_logprobs", values},
            {"top_logprobs", tops},
            {"text_offset", offsets}};
  }
  json content = json::array();
  for (size_t i = from; i < to; ++i) {
    std::string t = text(ids[i]);
    json top = json::array();
    for (const auto &[id, lp] : lps[i].top) {
      std::string s = text(id);
      top.push_back({{"token", s}, {"logprob", lp}, {"bytes", bytes(s)}});
    }
    content.push_back({{"token", t},
                       {"logprob", lps[i].logprob},
                       {"bytes", bytes(t)},
                       {"top_logprobs", top}});
  }
  return {{"content", content}};
}

json api::response(Route route, const std::string &id, int64_t created,
                   const std::string &model, const Output &o,
                   const Tokenizer *tokenizer) {
  const RequestOutput &out = *o.out;
  const bool calls = !o.parsed.toolCalls.empty();
  json choice = {{"index", 0}};
  if (route == Route::Completions) {
    choice["text"] = out.text;
  } else {
    json message = {{"role", "assistant"},
                    {"content", o.parsed.content.empty() && calls
                                    ? json(nullptr)
                                    : json(o.parsed.content)}};
    if (!o.parsed.reasoning.empty())
      message["reasoning_content"] = o.parsed.reasoning;
    if (calls)
      message["tool_calls"] = toolCallsJson(o.parsed.toolCalls);
    choice["message"] = message;
  }
  choice["logprobs"] =
      logprobs(route, tokenizer, out.ids, out.logprobs, 0, o.tokens, 0);
  choice["finish_reason"] = finishReason(out, calls);
  return {{"id", id},
          {"object", objectName(route, false)},
          {"created", created},
          {"model", model},
          {"choices", json::array({choice})},
          {"usage", usage(out)}};
}

json api::chunk(Route route, const std::string &id, int64_t created,
                const std::string &model, const OutputDelta &d,
                const char *finish, bool first, const json &logprobs) {
  json choice = {{"index", 0}};
  if (route == Route::Completions) {
    choice["text"] = d.content;
  } else {
    json delta = json::object();
    if (first)
      delta["role"] = "assistant";
    if (!d.reasoning.empty())
      delta["reasoning_content"] = d.reasoning;
    if (!d.content.empty() || (first && !finish && d.empty()))
      delta["content"] = d.content;
    if (!d.toolCalls.empty()) {
      json calls = json::array();
      for (const ToolCallDelta &t : d.toolCalls) {
        json c = {{"index", t.index}};
        if (!t.id.empty()) {
          c["id"] = t.id;
          c["type"] = "function";
          c["function"] = {{"name", t.name}, {"arguments", t.arguments}};
        } else {
          c["function"] = {{"arguments", t.arguments}};
        }
        calls.push_back(c);
      }
      delta["tool_calls"] = calls;
    }
    choice["delta"] = delta;
  }
  choice["logprobs"] = logprobs;
  choice["finish_reason"] = finish ? json(finish) : json(nullptr);
  return {{"id", id},
          {"object", objectName(route, true)},
          {"created", created},
          {"model", model},
          {"choices", json::array({choice})},
          {"usage", nullptr}};
}

json api::usageChunk(Route route, const std::string &id, int64_t created,
                     const std::string &model, const RequestOutput &out) {
  return {{"id", id},
          {"object", objectName(route, true)},
          {"created", created},
          {"model", model},
          {"choices", json::array()},
          {"usage", usage(out)}};
}
