//===- OpenAiApi.h - OpenAI request and response JSON -----------*- C++ -*-===//
//
// The JSON side of kiln-serve, free of HTTP: a /v1/completions or
// /v1/chat/completions body becomes an engine request (or an ApiError with
// its HTTP status), and engine outputs become OpenAI response objects and
// stream chunks (see ../shared/SERVING.md section 2).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TOOLS_KILN_SERVE_OPENAIAPI_H
#define KILN_TOOLS_KILN_SERVE_OPENAIAPI_H

#include "runtime/serve/Request.h"
#include "runtime/tokenizer/Tokenizer.h"

#include <nlohmann/json.hpp>

#include <string>

namespace kiln::serve::api {

enum class Route { Completions, Chat };

/// An error as OpenAI clients expect it: HTTP status and error object.
struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string code;
  nlohmann::json body() const;
};

/// A parsed request.
struct ApiRequest {
  RequestParams params;
  bool stream = false;
  bool includeUsage = false;
  std::string model;
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

/// The whole response of a non-streaming request.
nlohmann::json response(Route route, const std::string &id, int64_t created,
                        const std::string &model, const RequestOutput &out);

/// One stream chunk carrying `text` (and, when not empty, `finish`).
nlohmann::json chunk(Route route, const std::string &id, int64_t created,
                     const std::string &model, const std::string &text,
                     const char *finish, bool first);

/// The usage object of an output.
nlohmann::json usage(const RequestOutput &out);

/// The usage-only chunk (choices: []) of stream_options.include_usage.
nlohmann::json usageChunk(Route route, const std::string &id, int64_t created,
                          const std::string &model, const RequestOutput &out);

} // namespace kiln::serve::api

#endif // KILN_TOOLS_KILN_SERVE_OPENAIAPI_H
