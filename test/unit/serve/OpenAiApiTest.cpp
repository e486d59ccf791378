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
  const std::string user = R"("messages": [{"role": "user", "content": "x"}])";
  const std::string tool =
      R"("tools": [{"type": "function", "function": {"name": "f"}}])";
  struct Refused {
    Route route;
    std::string body, says;
  };
  const Refused refused[] = {
      {Route::Completions, "{oops", "not valid JSON"},
      {Route::Completions, "[1]", "must be a JSON object"},
      {Route::Completions, R"({"max_tokens": 3})", "'prompt' is required"},
      // An empty prompt, however it is written (found by fuzz_openai_request).
      {Route::Completions, R"({"prompt": ""})", "'prompt' is empty"},
      {Route::Completions, R"({"prompt": [""]})", "'prompt' is empty"},
      {Route::Completions, R"({"prompt": []})", "'prompt' is empty"},
      {Route::Completions, R"({"prompt": {"a": 1}})",
       "'prompt' must be a string or a list of token ids"},
      {Route::Completions, R"({"prompt": [1, "a"]})",
       "token ids must be integers"},
      {Route::Completions, R"({"prompt": [-1]})",
       "token id -1 is out of range"},
      {Route::Completions, R"({"prompt": "x", "logprobs": 21})",
       "'logprobs' must be an integer from 0 to 20"},
      {Route::Completions, R"({"prompt": "x", "max_tokens": 0})",
       "'max_tokens' must be at least 1"},
      {Route::Completions, R"({"prompt": "x", "top_k": "3"})",
       "'top_k' has the wrong type"},
      {Route::Completions, R"({"prompt": "x", "n": 2})", "'n' must be 1"},
      {Route::Completions, R"({"prompt": "x", "stop": 3})",
       "'stop' must be a string or a list of strings"},
      {Route::Completions, R"({"prompt": "x", "stop": ["a", 3]})",
       "'stop' must be a string or a list of strings"},
      {Route::Chat, R"({"messages": []})",
       "'messages' must be a non-empty list"},
      {Route::Chat, R"({"messages": [{"content": "x"}]})",
       "each message needs a string 'role'"},
      {Route::Chat, R"({"messages": [{"role": "robot", "content": "x"}]})",
       "unknown message role 'robot'"},
      {Route::Chat, R"({"messages": [{"role": "user", "content": 3}]})",
       "'content' must be a string or a list"},
      {Route::Chat, "{" + user + R"(, "logprobs": 1})",
       "'logprobs' must be a boolean"},
      {Route::Chat, "{" + user + R"(, "top_logprobs": 2})",
       "'top_logprobs' needs 'logprobs': true"},
      {Route::Chat, "{" + user + R"(, "chat_template_kwargs": 1})",
       "'chat_template_kwargs' must be an object"},
      {Route::Chat,
       "{" + user + R"(, "chat_template_kwargs": {"enable_thinking": 1}})",
       "'enable_thinking' must be a boolean"},
      {Route::Chat, "{" + user + "," + tool + R"(, "tool_choice": "required"})",
       "'tool_choice' \"required\" is not supported"},
      {Route::Chat,
       "{" + user + "," + tool +
           R"(, "tool_choice": {"type": "function", "function": {"name": "f"}}})",
       "(a forced call) is not supported"},
      {Route::Chat, "{" + user + R"(, "tools": {}})", "'tools' must be a list"},
      // Fields of the wrong type inside tools (found by fuzz_openai_request:
      // json::value() threw).
      {Route::Chat, "{" + user + R"(, "tools": [{"type": {"name": "f"}}]})",
       "each tool must be"},
      {Route::Chat,
       R"({"messages": [{"role": "assistant", "content": "", "tool_calls": 1}]})",
       "'tool_calls' must be a list"},
      {Route::Chat,
       R"({"messages": [{"role": "assistant", "content": "",
                          "tool_calls": [{"function": {}}]}]})",
       "each tool call needs a 'function' with a 'name'"},
      {Route::Chat,
       R"({"messages": [{"role": "assistant", "content": "", "tool_calls":
           [{"function": {"name": "f", "arguments": "[1]"}}]}]})",
       "tool call 'f': 'arguments' must be a JSON object"},
  };
  for (const Refused &r : refused) {
    ApiError error;
    parse(r.route, r.body, error);
    EXPECT_EQ(error.status, 400) << r.body;
    EXPECT_NE(error.message.find(r.says), std::string::npos)
        << r.body << "\n  said: " << error.message;
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
