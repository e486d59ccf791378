//===- OpenAiApi.h - OpenAI request and response JSON -----------*- C++ -*-===//
//
// The JSON side of kiln-serve, free of HTTP: a /v1/completions or
// /v1/chat/completions body becomes an engine request (or an ApiError with
// its HTTP status), and engine outputs become OpenAI response objects and
// stream chunks (see ../shared/SERVING.md section 2). Chat outputs go through
// the GLM parser (GlmOutput.h) into content, reasoning_content and
// tool_calls.
//
// Request JSON keeps its key order (nlohmann::ordered_json), so that tool
// definitions reach the chat template as the client wrote them.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TOOLS_KILN_SERVE_OPENAIAPI_H
#define KILN_TOOLS_KILN_SERVE_OPENAIAPI_H

#include "runtime/serve/Request.h"
#include "runtime/tokenizer/Tokenizer.h"
#include "tools/kiln-serve/GlmOutput.h"

#include <nlohmann/json.hpp>

#include <string>

namespace kiln::serve::api {

using Json = nlohmann::ordered_json;

enum class Route { Completions, Chat };

/// An error as OpenAI clients expect it: HTTP status and error object.
struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string code;
  Json body() const;
};

/// The chat part of a request, before tokenization.
struct ChatPrompt {
  std::vector<ChatMessage> messages;
  std::vector<std::string> tools; // one JSON line per tool, as rendered
  std::vector<ToolSpec> specs;
  bool thinking = true;    // chat_template_kwargs.enable_thinking
  bool parseTools = false; // tools given and tool_choice is not "none"
};

/// A parsed request.
struct ApiRequest {
  RequestParams params;
  bool stream = false;
  bool includeUsage = false;
  std::string model;
  /// Chat: how to split the output (reasoning, tool calls).
  GlmOutputOptions output;
};

struct ApiContext {
  std::string servedModel;
  const Tokenizer *tokenizer = nullptr; // null: token-id prompts only
  int64_t maxPositions = 0;
};

/// Parses a request body; `error` is set (and the result meaningless) when
/// the body is refused.
ApiRequest parseRequest(Route route, const std::string &body,
                        const ApiContext &ctx, ApiError &error);

/// The messages, tools and template switches of a chat request body.
bool parseChat(const Json &body, ChatPrompt &out, ApiError &error);

/// JSON as Python's json.dumps(ensure_ascii=False) writes it (", " and ": "
/// separators, keys in order): how chat templates print tools and values.
std::string pythonJson(const Json &value);

/// What a response reports of its output: the generated ids and logprobs
/// without a final stop id, and the chat parse.
struct Output {
  const RequestOutput *out = nullptr;
  size_t tokens = 0; // ids reported (a final stop id is not)
  ParsedOutput parsed;
};

/// The whole response of a non-streaming request.
Json response(Route route, const std::string &id, int64_t created,
              const std::string &model, const Output &o,
              const Tokenizer *tokenizer);

/// One stream chunk: `delta` (completions: its content is the text), the
/// logprobs of `tokens` ids/logprobs, and `finish` when not null.
Json chunk(Route route, const std::string &id, int64_t created,
           const std::string &model, const OutputDelta &delta,
           const char *finish, bool first, const Json &logprobs);

/// The `logprobs` object of `ids[from, to)` (null JSON without logprobs);
/// `textOffset` is where the first token's text starts (completions).
Json logprobs(Route route, const Tokenizer *tokenizer,
              const std::vector<int32_t> &ids,
              const std::vector<TokenLogprob> &logprobs, size_t from, size_t to,
              int64_t textOffset);

/// finish_reason: "tool_calls" when the chat output called tools.
const char *finishReason(const RequestOutput &out, bool toolCalls);

/// The usage object of an output.
Json usage(const RequestOutput &out);

/// The usage-only chunk (choices: []) of stream_options.include_usage.
Json usageChunk(Route route, const std::string &id, int64_t created,
                const std::string &model, const RequestOutput &out);

} // namespace kiln::serve::api

#endif // KILN_TOOLS_KILN_SERVE_OPENAIAPI_H
