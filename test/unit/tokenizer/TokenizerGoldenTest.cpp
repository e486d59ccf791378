//===- TokenizerGoldenTest.cpp - Tokenizer vs the fixtures' golden ids ----===//

#include "runtime/support/Npy.h"
#include "test/unit/tokenizer/TokenizerTestUtil.h"

#include <chrono>
#include <cstdio>

using namespace kiln;
using namespace kiln::test;
using nlohmann::json;

namespace {

class GoldenTest : public ::testing::TestWithParam<std::string> {
protected:
  void SetUp() override {
    Result<Tokenizer> t = loadFixtureTokenizer(GetParam());
    ASSERT_TRUE(t.isOk()) << t.status().toString();
    tokenizer_.emplace(std::move(t).value());
  }
  const Tokenizer &tok() const { return *tokenizer_; }
  std::string golden(const std::string &file) const {
    return kilnFixture(GetParam() + "/golden/" + file);
  }
  std::optional<Tokenizer> tokenizer_;
};

TEST_P(GoldenTest, PromptsEncodeToGoldenIds) {
  json prompts = json::parse(readFile(golden("prompts.json")));
  ASSERT_TRUE(prompts.is_array());
  ASSERT_GE(prompts.size(), 5u);
  int chats = 0;
  for (const json &p : prompts) {
    std::string name = p["name"].get<std::string>();
    std::string text = p["text"].get<std::string>();
    auto expected = p["token_ids"].get<std::vector<int32_t>>();
    bool chat = p["chat"].get<bool>();
    Result<std::vector<int32_t>> ids =
        tok().encode(text, /*parseSpecial=*/chat);
    ASSERT_TRUE(ids.isOk()) << name << ": " << ids.status().toString();
    EXPECT_EQ(*ids, expected) << name;
    Result<std::string> back = tok().decode(*ids);
    ASSERT_TRUE(back.isOk()) << back.status().toString();
    EXPECT_EQ(*back, text) << name;
    if (!chat)
      continue;
    ++chats;
    // The chat layout renders exactly the golden text and ids.
    std::vector<ChatMessage> messages;
    for (const json &m : p["messages"])
      messages.push_back(
          {m["role"].get<std::string>(), m["content"].get<std::string>()});
    Result<std::string> rendered =
        tok().renderChat(messages, /*addGenerationPrompt=*/true,
                         /*enableThinking=*/false);
    ASSERT_TRUE(rendered.isOk()) << rendered.status().toString();
    EXPECT_EQ(*rendered, text);
    Result<std::vector<int32_t>> chatIds =
        tok().encodeChat(messages, true, false);
    ASSERT_TRUE(chatIds.isOk()) << chatIds.status().toString();
    EXPECT_EQ(*chatIds, expected);
  }
  EXPECT_EQ(chats, 1);
}

TEST_P(GoldenTest, EvalTextEncodesToEvalTokens) {
  std::string evalPath = golden("eval.txt");
  std::string tokensPath = golden("eval_tokens.npy");
  // glm45-tiny-random ships eval_tokens.npy but not eval.txt; it is the same
  // slice as glm5-tiny-dev's (identical tokenizer.json and tokens).
  if (!std::ifstream(evalPath))
    evalPath = kilnFixture("glm5-tiny-dev/golden/eval.txt");
  std::string text = readFile(evalPath);
  Result<NpyArray> npy = readNpy(tokensPath);
  ASSERT_TRUE(npy.isOk()) << npy.status().toString();
  EXPECT_EQ(npy->dtype, NpyDType::I32);
  ASSERT_EQ(npy->shape.size(), 1u);
  Result<std::vector<int32_t>> expected = npy->toVector<int32_t>();
  ASSERT_TRUE(expected.isOk());

  Result<std::vector<int32_t>> ids = tok().encode(text, true);
  ASSERT_TRUE(ids.isOk()) << ids.status().toString();
  ASSERT_EQ(ids->size(), expected->size());
  EXPECT_EQ(*ids, *expected);
  Result<std::string> back = tok().decode(*ids);
  ASSERT_TRUE(back.isOk());
  EXPECT_EQ(*back, text);

  // Streaming decode concatenates to the same bytes.
  StreamDecoder stream(tok());
  std::string streamed;
  for (int32_t id : *ids) {
    Result<std::string> piece = stream.push(id);
    ASSERT_TRUE(piece.isOk()) << piece.status().toString();
    streamed += *piece;
  }
  streamed += stream.flush();
  EXPECT_EQ(streamed, text);
}

TEST_P(GoldenTest, StopSetAndChatTokensResolveByString) {
  Result<int32_t> eot = tok().tokenToId("<|endoftext|>");
  Result<int32_t> user = tok().tokenToId("<|user|>");
  Result<int32_t> obs = tok().tokenToId("<|observation|>");
  ASSERT_TRUE(eot.isOk() && user.isOk() && obs.isOk());
  EXPECT_EQ(tok().eosId(), *eot);
  EXPECT_EQ(tok().stopIds(), (std::vector<int32_t>{*eot, *user, *obs}));
  EXPECT_TRUE(tok().isStop(*user));
  EXPECT_FALSE(tok().isStop(*tok().tokenToId("<|assistant|>")));
  EXPECT_TRUE(tok().isSpecial(*eot));
  EXPECT_EQ(*tok().idToToken(*eot), "<|endoftext|>");
}

INSTANTIATE_TEST_SUITE_P(Fixtures, GoldenTest,
                         ::testing::Values("glm5-tiny-dev",
                                           "glm45-tiny-random"),
                         [](const auto &info) {
                           std::string n = info.param;
                           for (char &c : n)
                             if (!isalnum(static_cast<unsigned char>(c)))
                               c = '_';
                           return n;
                         });

TEST(GoldenIds, FixtureSpecialIdsMatchReadme) {
  Result<Tokenizer> t = loadFixtureTokenizer("glm5-tiny-dev");
  ASSERT_TRUE(t.isOk()) << t.status().toString();
  EXPECT_EQ(t->vocabSize(), 2048u);
  EXPECT_EQ(t->eosId(), 2036);
  EXPECT_EQ(t->stopIds(), (std::vector<int32_t>{2036, 2043, 2045}));
  EXPECT_EQ(*t->tokenToId("[gMASK]"), 2038);
}

} // namespace

namespace {

// Throughput of encode() on the eval slice; disabled by default. Run it in a
// Release build with --gtest_also_run_disabled_tests
// --gtest_filter='*EncodeThroughput*'.
TEST(TokenizerBench, DISABLED_EncodeThroughput) {
  Result<Tokenizer> t = loadFixtureTokenizer("glm5-tiny-dev");
  ASSERT_TRUE(t.isOk()) << t.status().toString();
  std::string text = readFile(kilnFixture("glm5-tiny-dev/golden/eval.txt"));
  ASSERT_FALSE(text.empty());
  const int reps = 300;
  size_t tokens = 0;
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < reps; ++i)
    tokens += t->encode(text)->size();
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  std::printf("encode eval.txt: %zu bytes -> %zu tokens, %.1f MB/s, %.2f M "
              "tokens/s\n",
              text.size(), tokens / reps,
              text.size() * double(reps) / seconds / 1e6,
              double(tokens) / seconds / 1e6);
}

} // namespace
