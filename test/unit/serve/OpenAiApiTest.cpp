//===- OpenAiApiTest.cpp - kiln-serve's request parser --------------------===//
//
// What parseRequest refuses (with the status and a message naming the
// field) and what it makes of accepted bodies, with the fixture tokenizer.
//
//===----------------------------------------------------------------------===//

#include "tools/kiln-serve/OpenAiApi.h"
#include "fuzz/FixtureTokenizer.h"

#include <gtest/gtest.h>

using namespace kiln;
using namespace kiln::serve::api;

namespace {

ApiRequest parse(Route route, const std::string &body, ApiError &error) {
  ApiContext ctx{"m", &fuzz::fixtureTokenizer(), 2048};
  return parseRequest(route, body, ctx, error);
}

TEST(OpenAiApi, RefusalsNameTheField) {
  const std::pair<Route, const char *> refused[] = {
      // An empty prompt, however it is written (found by fuzz_openai_request).
      {Route::Completions, R"({"prompt": ""})"},
      {Route::Completions, R"({"prompt": [""]})"},
      {Route::Completions, R"({"prompt": []})"},
      {Route::Completions, R"({"prompt": "x", "logprobs": 21})"},
      {Route::Completions, R"({"prompt": "x", "max_tokens": 0})"},
      {Route::Chat, R"({"messages": [{"role": "user", "content": "x"}],
                         "top_logprobs": 2})"},
      {Route::Chat, R"({"messages": [{"role": "user", "content": "x"}],
                         "tools": [{"type": "function", "function": {"name": "f"}}],
                         "tool_choice": "required"})"},
      {Route::Chat, R"({"messages": []})"},
      // Fields of the wrong type inside tools and content parts (found by
      // fuzz_openai_request: json::value() threw).
      {Route::Chat, R"({"messages": [{"role": "user", "content": "x"}],
                         "tools": [{"type": {"name": "f"}}]})"},
  };
  for (const auto &[route, body] : refused) {
    ApiError error;
    parse(route, body, error);
    EXPECT_EQ(error.status, 400) << body;
    EXPECT_FALSE(error.message.empty()) << body;
  }
  ApiError error;
  parse(Route::Completions, R"({"prompt": "x", "model": "other"})", error);
  EXPECT_EQ(error.status, 404);
  // A content part whose type is not a string is skipped, not thrown on.
  parse(Route::Chat,
        R"({"messages": [{"role": "user", "content": [{"type": 3}, "hi"]}]})",
        error);
  EXPECT_EQ(error.status, 0) << error.message;
}

TEST(OpenAiApi, AcceptedRequests) {
  ApiError error;
  ApiRequest r = parse(Route::Completions,
                       R"({"prompt": [5, 6, 7], "max_tokens": 3, "logprobs": 2,
                           "temperature": 0, "unknown_field": {"x": 1}})",
                       error);
  ASSERT_EQ(error.status, 0) << error.message;
  EXPECT_EQ(r.params.prompt, (std::vector<int32_t>{5, 6, 7}));
  EXPECT_EQ(r.params.maxTokens, 3);
  EXPECT_EQ(r.params.logprobs, 2);

  r = parse(Route::Chat,
            R"({"messages": [{"role": "user", "content": "hi"}],
                "tools": [{"type": "function", "function": {"name": "f",
                  "parameters": {"type": "object",
                                 "properties": {"s": {"type": "string"}}}}}],
                "chat_template_kwargs": {"enable_thinking": false},
                "logprobs": true})",
            error);
  ASSERT_EQ(error.status, 0) << error.message;
  EXPECT_TRUE(r.output.tools);
  EXPECT_FALSE(r.output.reasoning);
  ASSERT_EQ(r.output.specs.size(), 1u);
  EXPECT_EQ(r.output.specs[0].paramTypes.at("s"), "string");
  EXPECT_EQ(r.params.logprobs, 0);
  // Chat without max_tokens runs to the end of the context.
  EXPECT_EQ(r.params.maxTokens, 2048 - int64_t(r.params.prompt.size()));
}

} // namespace
