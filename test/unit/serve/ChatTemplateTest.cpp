//===- ChatTemplateTest.cpp - Kiln's GLM chat layout vs the jinja template ===//
//
// KILN_CHAT_RENDERS names the output of render_chats.py: chats.json rendered
// by jinja2 with GLM-4.6's chat template (ctest openai.chat-template renders
// it, then runs this). Each request body goes through kiln-serve's request
// parser and the fixture tokenizer's renderChat, and must give the same
// text; encoding it must decode back to it.
//
//===----------------------------------------------------------------------===//

#include "fuzz/FixtureTokenizer.h"
#include "tools/kiln-serve/OpenAiApi.h"

#include <gtest/gtest.h>

#include <fstream>

using namespace kiln;
using namespace kiln::serve::api;

TEST(ChatTemplate, RequestsRenderAsTheJinjaTemplateDoes) {
  const char *renders = std::getenv("KILN_CHAT_RENDERS");
  if (!renders || !*renders)
    GTEST_SKIP() << "set KILN_CHAT_RENDERS (ctest openai.chat-template does)";
  std::ifstream r(renders),
      c(std::string(KILN_SOURCE_DIR) + "/test/unit/serve/chats.json");
  ASSERT_TRUE(r && c);
  Json want = Json::parse(r), chats = Json::parse(c)["chats"];
  ASSERT_GE(chats.size(), 5u);
  const Tokenizer &tok = fuzz::fixtureTokenizer();
  for (const Json &chat : chats) {
    const std::string name = chat["name"].get<std::string>();
    SCOPED_TRACE(name);
    ChatPrompt prompt;
    ApiError error;
    ASSERT_TRUE(parseChat(chat["body"], prompt, error)) << error.message;
    Result<std::string> text =
        tok.renderChat(prompt.messages, /*addGenerationPrompt=*/true,
                       prompt.thinking, prompt.tools);
    ASSERT_TRUE(text.isOk()) << text.status().toString();
    EXPECT_EQ(*text, want[name].get<std::string>());
    Result<std::vector<int32_t>> ids =
        tok.encodeChat(prompt.messages, true, prompt.thinking, prompt.tools);
    ASSERT_TRUE(ids.isOk()) << ids.status().toString();
    EXPECT_EQ(*tok.decode(*ids), *text);
  }
}
