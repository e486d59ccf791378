//===- fuzz_chat.cpp - GLM chat rendering and encoding --------------------===//
//
// With the fixture tokenizer. Byte 0 of the input holds flags
// (addGenerationPrompt, enableThinking); the rest is split on 0x1E into
// messages, each a role byte (< 0xF0: one of the four roles; otherwise the
// role is the text up to the first ':', usually not a valid role) and the
// content. Properties:
//  * renderChat fails exactly when some role is invalid; encodeChat fails
//    exactly then or when some content is invalid UTF-8;
//  * decode(encodeChat(m)) == renderChat(m);
//  * no special token can be injected by content: the special ids in
//    encodeChat's output are exactly the layout's token pieces.
//
//===----------------------------------------------------------------------===//

#include "fuzz/FixtureTokenizer.h"
#include "support/tokenizer/Utf8.h"

using namespace kiln;

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  (void)fuzz::fixtureTokenizer();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const Tokenizer &tok = fuzz::fixtureTokenizer();
  if (size == 0)
    return 0;
  bool addGenerationPrompt = data[0] & 1, enableThinking = data[0] & 2;
  static const char *const kRoles[] = {"system", "user", "assistant",
                                       "observation"};
  std::vector<ChatMessage> messages;
  bool rolesValid = true, contentValid = true;
  std::string_view rest(reinterpret_cast<const char *>(data + 1), size - 1);
  while (!rest.empty()) {
    size_t end = rest.find('\x1e');
    std::string_view record = rest.substr(0, end);
    rest = end == std::string_view::npos ? std::string_view()
                                         : rest.substr(end + 1);
    ChatMessage m;
    if (!record.empty() && static_cast<unsigned char>(record[0]) < 0xF0) {
      m.role = kRoles[static_cast<unsigned char>(record[0]) % 4];
      m.content = std::string(record.substr(1));
    } else {
      record = record.substr(record.empty() ? 0 : 1);
      size_t colon = record.find(':');
      m.role = std::string(record.substr(0, colon));
      m.content = colon == std::string_view::npos
                      ? std::string()
                      : std::string(record.substr(colon + 1));
      rolesValid = rolesValid && (m.role == "system" || m.role == "user" ||
                                  m.role == "assistant" ||
                                  m.role == "observation" || m.role == "tool");
    }
    contentValid =
        contentValid && findInvalidUtf8(m.content) == std::string_view::npos;
    messages.push_back(std::move(m));
  }

  Result<std::string> text =
      tok.renderChat(messages, addGenerationPrompt, enableThinking);
  Result<std::vector<int32_t>> ids =
      tok.encodeChat(messages, addGenerationPrompt, enableThinking);
  KILN_FUZZ_CHECK(text.isOk() == rolesValid, "renderChat ok=%d, roles ok=%d",
                  text.isOk(), rolesValid);
  KILN_FUZZ_CHECK(ids.isOk() == (rolesValid && contentValid),
                  "encodeChat ok=%d, roles ok=%d, UTF-8 ok=%d: %s", ids.isOk(),
                  rolesValid, contentValid, ids.status().toString().c_str());
  if (!ids.isOk())
    return 0;
  Result<std::string> decoded = tok.decode(*ids);
  KILN_FUZZ_CHECK(decoded.isOk() && *decoded == *text,
                  "decode(encodeChat) != renderChat");
  // An assistant turn adds <think></think> to its role token.
  size_t layoutTokens = 2 + messages.size() +
                        (addGenerationPrompt ? (enableThinking ? 1 : 3) : 0);
  // Consecutive tool results share one <|observation|>.
  for (size_t i = 0; i < messages.size(); ++i) {
    layoutTokens += messages[i].role == "assistant" ? 2 : 0;
    layoutTokens -=
        messages[i].role == "tool" && i > 0 && messages[i - 1].role == "tool";
  }
  size_t special = 0;
  for (int32_t id : *ids)
    special += tok.isSpecial(id);
  KILN_FUZZ_CHECK(special == layoutTokens,
                  "%zu special ids for %zu layout tokens: content injected a "
                  "special token",
                  special, layoutTokens);
  return 0;
}
