//===- fuzz_openai_request.cpp - kiln-serve's request parser --------------===//
//
// Byte 0 picks the route (bit 0: chat); the rest is the request body, parsed
// with the fixture tokenizer as kiln-serve parses it (JSON, chat template,
// tools, logprobs, sampling). Properties: a refusal carries a 4xx status and
// a message; an accepted request has a non-empty prompt of in-vocabulary ids,
// at least one token to generate, sampling settings the engine accepts and a
// logprobs count of -1 to 20; the chat part renders and encodes to the same
// text.
//
//===----------------------------------------------------------------------===//

#include "fuzz/FixtureTokenizer.h"
#include "tools/kiln-serve/OpenAiApi.h"

using namespace kiln;
using namespace kiln::serve::api;

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  (void)fuzz::fixtureTokenizer();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0)
    return 0;
  const Tokenizer &tok = fuzz::fixtureTokenizer();
  const Route route = data[0] & 1 ? Route::Chat : Route::Completions;
  const std::string body(reinterpret_cast<const char *>(data + 1), size - 1);
  ApiContext ctx{"fixture", &tok, 2048};
  ApiError error;
  ApiRequest r = parseRequest(route, body, ctx, error);
  if (error.status) {
    KILN_FUZZ_CHECK(error.status >= 400 && error.status < 500 &&
                        !error.message.empty(),
                    "refusal with status %d, message '%s'", error.status,
                    error.message.c_str());
    KILN_FUZZ_CHECK(error.body()["error"]["message"] == error.message,
                    "error JSON does not carry the message");
    return 0;
  }
  const serve::RequestParams &p = r.params;
  KILN_FUZZ_CHECK(!p.prompt.empty(), "accepted with an empty prompt");
  for (int32_t id : p.prompt)
    KILN_FUZZ_CHECK(id >= 0, "negative prompt id %d", id);
  KILN_FUZZ_CHECK(p.maxTokens >= 1, "max tokens %lld", (long long)p.maxTokens);
  KILN_FUZZ_CHECK(p.sampling.check().isOk(), "sampling refused later: %s",
                  p.sampling.check().message().c_str());
  KILN_FUZZ_CHECK(p.logprobs >= -1 && p.logprobs <= 20, "logprobs %d",
                  p.logprobs);
  if (route == Route::Chat) {
    ChatPrompt chat;
    ApiError again;
    KILN_FUZZ_CHECK(parseChat(Json::parse(body), chat, again),
                    "parseChat refused an accepted body: %s",
                    again.message.c_str());
    Result<std::string> text =
        tok.renderChat(chat.messages, true, chat.thinking, chat.tools);
    KILN_FUZZ_CHECK(text.isOk(), "accepted chat does not render");
    Result<std::string> decoded = tok.decode(p.prompt);
    KILN_FUZZ_CHECK(decoded.isOk() && *decoded == *text,
                    "the prompt does not decode to the rendered chat");
  }
  return 0;
}
