//===- TokenizerBehaviorTest.cpp - Round trips, streaming, limits ---------===//

#include "support/tokenizer/Utf8.h"
#include "test/unit/tokenizer/TokenizerTestUtil.h"

#include <random>
#include <thread>

using namespace kiln;
using namespace kiln::test;

namespace {

class BehaviorTest : public ::testing::Test {
protected:
  static void SetUpTestSuite() {
    Result<Tokenizer> t = loadFixtureTokenizer("glm5-tiny-dev");
    ASSERT_TRUE(t.isOk()) << t.status().toString();
    tokenizer_ = new Tokenizer(std::move(t).value());
  }
  static void TearDownTestSuite() {
    delete tokenizer_;
    tokenizer_ = nullptr;
  }
  static const Tokenizer &tok() { return *tokenizer_; }
  static Tokenizer *tokenizer_;
};
Tokenizer *BehaviorTest::tokenizer_ = nullptr;

/// Random valid UTF-8 drawn from ASCII, whitespace, Latin, Greek, CJK,
/// combining marks, emoji, and the GLM special-token spellings.
std::string randomText(std::mt19937 &rng, size_t pieces) {
  static const std::pair<uint32_t, uint32_t> ranges[] = {
      {0x20, 0x7E},       {0x09, 0x0D},       {0xA0, 0xFF},
      {0x370, 0x3FF},     {0x300, 0x36F},     {0x4E00, 0x4FFF},
      {0x3000, 0x3003},   {0x1F600, 0x1F64F}, {0x2000, 0x200B},
      {0x10000, 0x1000F}, {0xFFF0, 0xFFFD}};
  static const char *specials[] = {"<|user|>", "[gMASK]", "<think>", "<sop",
                                   "'s",       "'LL",     "\r\n",    "    "};
  std::string out;
  for (size_t i = 0; i < pieces; ++i) {
    uint32_t kind = rng() % 16;
    if (kind == 0) {
      out += specials[rng() % (sizeof(specials) / sizeof(*specials))];
      continue;
    }
    const auto &range = ranges[kind < 6 ? 0 : rng() % 11];
    uint32_t cp = range.first + rng() % (range.second - range.first + 1);
    appendUtf8(cp, out);
  }
  return out;
}

TEST_F(BehaviorTest, RandomUnicodeRoundTrips) {
  std::mt19937 rng(1234);
  for (int iter = 0; iter < 300; ++iter) {
    std::string text = randomText(rng, 1 + rng() % 200);
    for (bool parseSpecial : {false, true}) {
      Result<std::vector<int32_t>> ids = tok().encode(text, parseSpecial);
      ASSERT_TRUE(ids.isOk()) << ids.status().toString();
      if (!parseSpecial) {
        for (int32_t id : *ids) {
          ASSERT_FALSE(tok().isSpecial(id)) << "special id " << id;
        }
      }
      Result<std::string> back = tok().decode(*ids);
      ASSERT_TRUE(back.isOk());
      ASSERT_EQ(*back, text);

      StreamDecoder stream(tok());
      std::string streamed;
      for (int32_t id : *ids) {
        Result<std::string> piece = stream.push(id);
        ASSERT_TRUE(piece.isOk());
        // Every emitted piece is complete UTF-8 on its own.
        ASSERT_EQ(findInvalidUtf8(*piece), std::string_view::npos);
        streamed += *piece;
      }
      EXPECT_EQ(stream.pendingBytes(), 0u);
      streamed += stream.flush();
      ASSERT_EQ(streamed, text);
    }
  }
}

TEST_F(BehaviorTest, ParseSpecialControlsSpecialTokens) {
  std::string text = "a<|user|>b";
  Result<std::vector<int32_t>> withSpecial = tok().encode(text, true);
  Result<std::vector<int32_t>> plain = tok().encode(text, false);
  ASSERT_TRUE(withSpecial.isOk() && plain.isOk());
  int32_t user = *tok().tokenToId("<|user|>");
  EXPECT_EQ(std::count(withSpecial->begin(), withSpecial->end(), user), 1);
  EXPECT_EQ(std::count(plain->begin(), plain->end(), user), 0);
  EXPECT_GT(plain->size(), withSpecial->size());
  EXPECT_EQ(*tok().decode(*plain), text);
  EXPECT_EQ(*tok().decode(*withSpecial, /*skipSpecial=*/true), "ab");
  // Longest match: "[gMASK]" is not split into "[" ... or matched as
  // "[MASK]".
  Result<std::vector<int32_t>> masks = tok().encode("[gMASK][MASK][sMASK]");
  ASSERT_TRUE(masks.isOk());
  EXPECT_EQ(*masks, (std::vector<int32_t>{2038, 2037, 2039}));
}

TEST_F(BehaviorTest, InvalidUtf8IsRejectedWithOffset) {
  for (std::string bad :
       {std::string("ab\xFF"), std::string("ab\xE4\xB8"),
        std::string("ab\xC0\xAF"), std::string("ab\xED\xA0\x80"),
        std::string("ab\xF4\x90\x80\x80"), std::string("ab\x80x")}) {
    Result<std::vector<int32_t>> ids = tok().encode(bad);
    ASSERT_FALSE(ids.isOk());
    EXPECT_EQ(ids.status().code(), StatusCode::InvalidArgument);
    EXPECT_NE(ids.status().message().find("not valid UTF-8"),
              std::string::npos);
    EXPECT_NE(ids.status().message().find("offset 2"), std::string::npos)
        << ids.status().message();
  }
  // Random bytes: either valid UTF-8 that round-trips, or a clean error.
  std::mt19937 rng(99);
  for (int iter = 0; iter < 2000; ++iter) {
    std::string bytes(rng() % 24, '\0');
    for (char &c : bytes)
      c = static_cast<char>(rng() % 4 ? 0x80 + rng() % 0x80 : rng() % 0x80);
    Result<std::vector<int32_t>> r = tok().encode(bytes);
    if (findInvalidUtf8(bytes) == std::string_view::npos) {
      ASSERT_TRUE(r.isOk());
      EXPECT_EQ(*tok().decode(*r), bytes);
    } else {
      ASSERT_FALSE(r.isOk());
      EXPECT_EQ(r.status().code(), StatusCode::InvalidArgument);
    }
  }
  // Embedded NULs are valid UTF-8.
  std::string nul("a\0b", 3);
  Result<std::vector<int32_t>> ids = tok().encode(nul);
  ASSERT_TRUE(ids.isOk());
  EXPECT_EQ(*tok().decode(*ids), nul);
  EXPECT_TRUE(tok().encode("").isOk());
  EXPECT_TRUE(tok().encode("")->empty());
}

TEST_F(BehaviorTest, DecodeRejectsBadIds) {
  for (int32_t bad : {-1, static_cast<int32_t>(tok().vocabSize()), 1 << 30}) {
    Result<std::string> text = tok().decode(std::vector<int32_t>{5, bad});
    ASSERT_FALSE(text.isOk());
    EXPECT_EQ(text.status().code(), StatusCode::OutOfRange);
    EXPECT_NE(text.status().message().find("ids[1]"), std::string::npos);
    EXPECT_NE(text.status().message().find(std::to_string(bad)),
              std::string::npos);
    EXPECT_FALSE(tok().idToToken(bad).isOk());
    StreamDecoder stream(tok());
    EXPECT_FALSE(stream.push(bad).isOk());
  }
  EXPECT_EQ(tok().tokenToId("no such token").status().code(),
            StatusCode::NotFound);
}

TEST_F(BehaviorTest, InputLengthLimit) {
  Result<TokenizerData> data =
      parseTokenizerJson(kilnFixture("glm5-tiny-dev/tokenizer.json"));
  ASSERT_TRUE(data.isOk());
  TokenizerOptions options;
  options.maxInputBytes = 16;
  Result<Tokenizer> t = Tokenizer::create(*data, options);
  ASSERT_TRUE(t.isOk());
  EXPECT_TRUE(t->encode(std::string(16, 'a')).isOk());
  Result<std::vector<int32_t>> ids = t->encode(std::string(17, 'a'));
  ASSERT_FALSE(ids.isOk());
  EXPECT_EQ(ids.status().code(), StatusCode::ResourceExhausted);
  EXPECT_NE(ids.status().message().find("maxInputBytes = 16"),
            std::string::npos);
  EXPECT_NE(ids.status().message().find("17 bytes"), std::string::npos);
  EXPECT_FALSE(
      t->encodeChat({{"user", std::string(20, 'a')}}, true, false).isOk());
}

TEST_F(BehaviorTest, LongRunsDoNotBreak) {
  // Long single pre-tokenizer words (whitespace, punctuation, letters,
  // newlines) stress the regex and BPE.
  for (std::string text :
       {std::string(1 << 18, ' '), std::string(1 << 18, '='),
        std::string(1 << 17, 'e'), std::string(1 << 17, '\n'),
        std::string(1 << 16, ' ') + "x" + std::string(1 << 16, '\n')}) {
    Result<std::vector<int32_t>> ids = tok().encode(text);
    ASSERT_TRUE(ids.isOk()) << ids.status().toString();
    Result<std::string> back = tok().decode(*ids);
    ASSERT_TRUE(back.isOk());
    EXPECT_TRUE(*back == text);
  }
}

TEST_F(BehaviorTest, StreamDecoderHoldsSplitCharacters) {
  // "é" (C3 A9) and "😀" (F0 9F 98 80) have no merges in the tiny
  // vocabulary, so each byte is its own token.
  std::string text = "\xC3\xA9\xF0\x9F\x98\x80";
  Result<std::vector<int32_t>> ids = tok().encode(text);
  ASSERT_TRUE(ids.isOk());
  ASSERT_EQ(ids->size(), 6u);
  StreamDecoder stream(tok());
  std::vector<std::string> pieces;
  for (int32_t id : *ids)
    pieces.push_back(*stream.push(id));
  EXPECT_EQ(pieces, (std::vector<std::string>{"", "\xC3\xA9", "", "", "",
                                              "\xF0\x9F\x98\x80"}));
  EXPECT_EQ(stream.flush(), "");

  // A lead byte is held until its character completes or turns out to be
  // invalid; bytes that can never become valid pass through at once.
  int32_t c3 = (*ids)[0], a9 = (*ids)[1], f0 = (*ids)[2];
  StreamDecoder partial(tok());
  EXPECT_EQ(*partial.push(c3), "");
  EXPECT_EQ(partial.pendingBytes(), 1u);
  EXPECT_EQ(*partial.push(f0), "\xC3"); // C3 F0 can never be valid
  EXPECT_EQ(*partial.push(a9), "");     // F0 A9 may still become valid
  EXPECT_EQ(partial.pendingBytes(), 2u);
  EXPECT_EQ(*partial.push(c3), "\xF0\xA9");
  EXPECT_EQ(partial.flush(), "\xC3");
  EXPECT_EQ(partial.pendingBytes(), 0u);
}

TEST(Utf8, CompletePrefix) {
  EXPECT_EQ(completeUtf8Prefix(""), 0u);
  EXPECT_EQ(completeUtf8Prefix("abc"), 3u);
  EXPECT_EQ(completeUtf8Prefix("a\xC3"), 1u);
  EXPECT_EQ(completeUtf8Prefix("a\xC3\xA9"), 3u);
  EXPECT_EQ(completeUtf8Prefix("a\xE4\xB8"), 1u);
  EXPECT_EQ(completeUtf8Prefix("a\xF0\x9F\x98"), 1u);
  EXPECT_EQ(completeUtf8Prefix("a\xF0\x9F\x98\x80"), 5u);
  EXPECT_EQ(completeUtf8Prefix("a\xE0\x80"), 3u); // overlong: never valid
  EXPECT_EQ(completeUtf8Prefix("a\xFF"), 2u);
  EXPECT_EQ(completeUtf8Prefix("a\x80"), 2u);
  EXPECT_EQ(completeUtf8Prefix("\x80\x80\x80"), 3u);
}

TEST_F(BehaviorTest, ChatLayout) {
  std::vector<ChatMessage> messages = {
      {"system", "S"}, {"user", "U"}, {"assistant", "A"}, {"observation", "O"}};
  // An earlier assistant turn gets an empty <think></think> (GLM-4.6+).
  EXPECT_EQ(*tok().renderChat(messages, true, true),
            "[gMASK]<sop><|system|>\nS<|user|>\nU<|assistant|>\n<think></think>"
            "\nA<|observation|>\nO<|assistant|>");
  EXPECT_EQ(*tok().renderChat(messages, false, false),
            "[gMASK]<sop><|system|>\nS<|user|>\nU<|assistant|>\n<think></think>"
            "\nA<|observation|>\nO");
  EXPECT_EQ(*tok().renderChat({}, true, false),
            "[gMASK]<sop><|assistant|>\n<think></think>");
  for (bool gen : {false, true})
    for (bool think : {false, true}) {
      Result<std::vector<int32_t>> a = tok().encodeChat(messages, gen, think);
      Result<std::vector<int32_t>> b =
          tok().encode(*tok().renderChat(messages, gen, think), true);
      ASSERT_TRUE(a.isOk() && b.isOk());
      EXPECT_EQ(*a, *b);
    }

  Result<std::string> bad =
      tok().renderChat({{"user", "x"}, {"function", "y"}}, true, false);
  ASSERT_FALSE(bad.isOk());
  EXPECT_EQ(bad.status().code(), StatusCode::InvalidArgument);
  EXPECT_NE(bad.status().message().find("messages[1].role"), std::string::npos);
  EXPECT_NE(bad.status().message().find("'function'"), std::string::npos);
  EXPECT_FALSE(tok().encodeChat({{"User", "x"}}, true, false).isOk());
  EXPECT_FALSE(tok().encodeChat({{"user", "bad \xFF"}}, true, false).isOk());
}

TEST_F(BehaviorTest, EncodeChatDoesNotParseSpecialsInContent) {
  std::vector<ChatMessage> messages = {
      {"user", "hi<|assistant|>\n<think>x</think><|endoftext|>"}};
  Result<std::vector<int32_t>> ids = tok().encodeChat(messages, true, false);
  ASSERT_TRUE(ids.isOk());
  int specials = 0;
  for (int32_t id : *ids)
    specials += tok().isSpecial(id);
  // [gMASK] <sop> <|user|> <|assistant|> <think> </think>
  EXPECT_EQ(specials, 6);
  EXPECT_EQ(*tok().decode(*ids), *tok().renderChat(messages, true, false));
}

TEST_F(BehaviorTest, ConcurrentEncodeIsConsistent) {
  std::string text = readFile(kilnFixture("glm5-tiny-dev/golden/eval.txt"));
  Result<std::vector<int32_t>> expected = tok().encode(text);
  ASSERT_TRUE(expected.isOk());
  std::vector<std::vector<int32_t>> results(4);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < results.size(); ++i)
    threads.emplace_back([&, i] {
      Result<std::vector<int32_t>> ids = tok().encode(text);
      if (ids.isOk())
        results[i] = *ids;
    });
  for (std::thread &t : threads)
    t.join();
  for (const auto &r : results)
    EXPECT_EQ(r, *expected);
}

TEST(BpeMerges, LeftmostFirstOnEqualRank) {
  // "lll" with the merge "l l": the leftmost pair merges first -> "ll" "l".
  Result<Tokenizer> t = buildTokenizer(miniTokenizerJson());
  ASSERT_TRUE(t.isOk()) << t.status().toString();
  Result<std::vector<int32_t>> ids = t->encode("lll");
  ASSERT_TRUE(ids.isOk());
  ASSERT_EQ(ids->size(), 2u);
  EXPECT_EQ(*t->idToToken((*ids)[0]), "ll");
  EXPECT_EQ(*t->idToToken((*ids)[1]), "l");
  // Ranks decide, not position: "hello" needs he, ll, hell, o in order.
  EXPECT_EQ(*t->idToToken((*t->encode("hello"))[0]), "hello");
}

} // namespace
