//===- TokenizerJsonTest.cpp - tokenizer.json parsing and rejection -------===//

#include "runtime/tokenizer/PreTokenizer.h"
#include "test/unit/tokenizer/TokenizerTestUtil.h"

#include <random>

using namespace kiln;
using namespace kiln::test;
using nlohmann::json;

namespace {

/// Expects that building a tokenizer from `j` fails with a message that
/// contains every one of `needles`.
void expectRejected(const json &j,
                    std::initializer_list<const char *> needles) {
  Result<Tokenizer> t = buildTokenizer(j);
  ASSERT_FALSE(t.isOk()) << "accepted: " << j.dump().substr(0, 200);
  for (const char *needle : needles)
    EXPECT_NE(t.status().message().find(needle), std::string::npos)
        << "message '" << t.status().message() << "' lacks '" << needle << "'";
}

std::vector<std::string> splitWith(const PreTokenizerStep &step,
                                   const std::string &text) {
  Result<PreTokenizer> pre = PreTokenizer::create({step});
  EXPECT_TRUE(pre.isOk()) << pre.status().toString();
  if (!pre.isOk())
    return {};
  PreTokenizerScratch scratch;
  std::vector<std::string_view> words;
  Status s = pre->split(text, scratch, words);
  EXPECT_TRUE(s.isOk()) << s.toString();
  return std::vector<std::string>(words.begin(), words.end());
}

TEST(TokenizerJson, MiniTokenizerBuildsAndMerges) {
  Result<Tokenizer> t = buildTokenizer(miniTokenizerJson());
  ASSERT_TRUE(t.isOk()) << t.status().toString();
  Result<std::vector<int32_t>> ids = t->encode("hello world");
  ASSERT_TRUE(ids.isOk()) << ids.status().toString();
  // "hello" merges fully; " world" is "Ġw" + o r l d.
  ASSERT_EQ(ids->size(), 6u);
  EXPECT_EQ(*t->idToToken((*ids)[0]), "hello");
  EXPECT_EQ(*t->idToToken((*ids)[1]), "\xC4\xA0w");
  EXPECT_EQ(*t->decode(*ids), "hello world");
}

TEST(TokenizerJson, ParsesFixtureShape) {
  Result<TokenizerData> data =
      parseTokenizerJson(kilnFixture("glm5-tiny-dev/tokenizer.json"));
  ASSERT_TRUE(data.isOk()) << data.status().toString();
  EXPECT_EQ(data->vocab.size(), 2048u);
  EXPECT_EQ(data->merges.size(), 1780u);
  EXPECT_EQ(data->merges[0],
            (std::pair<std::string, std::string>{"\xC4\xA0", "\xC4\xA0"}));
  ASSERT_EQ(data->preTokenizer.size(), 1u); // Split; ByteLevel adds no step
  EXPECT_EQ(data->preTokenizer[0].behavior, SplitBehavior::Isolated);
  ASSERT_EQ(data->addedTokens.size(), 12u);
  EXPECT_EQ(data->addedTokens[0].content, "<|endoftext|>");
  EXPECT_EQ(data->addedTokens[0].id, 2036);
  EXPECT_TRUE(data->addedTokens[0].special);
  EXPECT_TRUE(data->vocab[2036].empty()); // an added-only id
}

TEST(TokenizerJson, StringAndArrayMergesAgree) {
  json j = miniTokenizerJson();
  json strings = json::array();
  for (const json &m : j["model"]["merges"])
    strings.push_back(m[0].get<std::string>() + " " + m[1].get<std::string>());
  json k = j;
  k["model"]["merges"] = strings;
  Result<TokenizerData> a = parseTokenizerJsonText(j.dump());
  Result<TokenizerData> b = parseTokenizerJsonText(k.dump());
  ASSERT_TRUE(a.isOk() && b.isOk());
  EXPECT_TRUE(*a == *b);
}

TEST(TokenizerJson, ByteLevelAloneUsesGpt2Regex) {
  json j = miniTokenizerJson();
  j["pre_tokenizer"] = {
      {"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}};
  Result<TokenizerData> data = parseTokenizerJsonText(j.dump());
  ASSERT_TRUE(data.isOk()) << data.status().toString();
  ASSERT_EQ(data->preTokenizer.size(), 1u);
  EXPECT_EQ(data->preTokenizer[0].pattern, kGpt2SplitPattern);
  Result<Tokenizer> t = Tokenizer::create(*data);
  ASSERT_TRUE(t.isOk()) << t.status().toString();
  // GPT-2 splits "hello123" into "hello" and "123" (digits are not capped
  // at 3 as in GLM's pattern).
  Result<std::vector<int32_t>> ids = t->encode("hello12345");
  ASSERT_TRUE(ids.isOk());
  EXPECT_EQ(ids->size(), 6u);
}

TEST(TokenizerJson, ByteLevelPrefixSpace) {
  json j = miniTokenizerJson();
  j["pre_tokenizer"] = {{"type", "ByteLevel"}, {"add_prefix_space", true}};
  Result<Tokenizer> t = buildTokenizer(j);
  ASSERT_TRUE(t.isOk()) << t.status().toString();
  Result<std::vector<int32_t>> ids = t->encode("world");
  ASSERT_TRUE(ids.isOk());
  // " world" -> "Ġw" o r l d, and decoding keeps the added space.
  EXPECT_EQ(ids->size(), 5u);
  EXPECT_EQ(*t->decode(*ids), " world");
}

TEST(TokenizerJson, SplitBehaviorsMatchHuggingFace) {
  // Examples from the Hugging Face tokenizers documentation.
  PreTokenizerStep step;
  step.pattern = "-";
  const std::string text = "the-final--countdown";
  using V = std::vector<std::string>;
  step.behavior = SplitBehavior::Removed;
  EXPECT_EQ(splitWith(step, text), (V{"the", "final", "countdown"}));
  step.behavior = SplitBehavior::Isolated;
  EXPECT_EQ(splitWith(step, text),
            (V{"the", "-", "final", "-", "-", "countdown"}));
  step.behavior = SplitBehavior::MergedWithPrevious;
  EXPECT_EQ(splitWith(step, text), (V{"the-", "final-", "-", "countdown"}));
  step.behavior = SplitBehavior::MergedWithNext;
  EXPECT_EQ(splitWith(step, text), (V{"the", "-final", "-", "-countdown"}));
  step.behavior = SplitBehavior::Contiguous;
  EXPECT_EQ(splitWith(step, text), (V{"the", "-", "final", "--", "countdown"}));
  step.behavior = SplitBehavior::Removed;
  step.invert = true;
  EXPECT_EQ(splitWith(step, text), (V{"-", "-", "-"}));
}

TEST(TokenizerJson, SplitStringPatternIsLiteral) {
  json j = miniTokenizerJson();
  j["pre_tokenizer"]["pretokenizers"][0] = {{"type", "Split"},
                                            {"pattern", {{"String", "."}}},
                                            {"behavior", "Removed"},
                                            {"invert", false}};
  Result<TokenizerData> data = parseTokenizerJsonText(j.dump());
  ASSERT_TRUE(data.isOk()) << data.status().toString();
  EXPECT_EQ(splitWith(data->preTokenizer[0], "a.b.c"),
            (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(splitWith(data->preTokenizer[0], "abc"),
            (std::vector<std::string>{"abc"}));
}

TEST(TokenizerJson, GlmRegexUsesUnicodeProperties) {
  Result<TokenizerData> data =
      parseTokenizerJson(kilnFixture("glm5-tiny-dev/tokenizer.json"));
  ASSERT_TRUE(data.isOk());
  // \p{L} covers non-ASCII letters, \p{N}{1,3} caps digit runs, \s covers
  // U+3000, and the contraction group is case-insensitive.
  EXPECT_EQ(
      splitWith(data->preTokenizer[0], "caf\xC3\xA9 1234 it'S"),
      (std::vector<std::string>{"caf\xC3\xA9", " ", "123", "4", " it", "'S"}));
  EXPECT_EQ(splitWith(data->preTokenizer[0], "a\xE3\x80\x80 b"),
            (std::vector<std::string>{"a", "\xE3\x80\x80", " b"}));
}

TEST(TokenizerJsonReject, NotJson) {
  Result<TokenizerData> d = parseTokenizerJsonText("{\"model\": ", "tok.json");
  ASSERT_FALSE(d.isOk());
  EXPECT_NE(d.status().message().find("tok.json: not valid JSON"),
            std::string::npos)
      << d.status().message();
  EXPECT_FALSE(parseTokenizerJsonText("[1, 2]").isOk());
  EXPECT_FALSE(parseTokenizerJsonText("").isOk());
}

TEST(TokenizerJsonReject, MissingFile) {
  Result<TokenizerData> d = parseTokenizerJson("/nonexistent/tokenizer.json");
  ASSERT_FALSE(d.isOk());
  EXPECT_EQ(d.status().code(), StatusCode::NotFound);
  EXPECT_NE(d.status().message().find("/nonexistent/tokenizer.json"),
            std::string::npos);
}

TEST(TokenizerJsonReject, MissingModel) {
  json j = miniTokenizerJson();
  j.erase("model");
  expectRejected(j, {"model", "missing"});
  j["model"] = nullptr;
  expectRejected(j, {"model", "missing"});
}

TEST(TokenizerJsonReject, NonBpeModel) {
  json j = miniTokenizerJson();
  j["model"]["type"] = "WordPiece";
  expectRejected(j, {"model.type", "WordPiece", "BPE"});
  j["model"]["type"] = "Unigram";
  expectRejected(j, {"model.type", "Unigram"});
}

TEST(TokenizerJsonReject, UnsupportedBpeOptions) {
  json j = miniTokenizerJson();
  j["model"]["dropout"] = 0.1;
  expectRejected(j, {"model.dropout"});
  j = miniTokenizerJson();
  j["model"]["byte_fallback"] = true;
  expectRejected(j, {"model.byte_fallback"});
  j = miniTokenizerJson();
  j["model"]["continuing_subword_prefix"] = "##";
  expectRejected(j, {"model.continuing_subword_prefix"});
}

TEST(TokenizerJsonReject, BadMergesEntries) {
  for (json bad :
       {json("he"), json("h e l"), json(" he"), json::array({"h"}),
        json::array({"h", "e", "l"}), json::array({"h", 3}), json(7)}) {
    json j = miniTokenizerJson();
    j["model"]["merges"].push_back(bad);
    expectRejected(j, {"model.merges[5]"});
  }
  json j = miniTokenizerJson();
  j["model"]["merges"] = "h e";
  expectRejected(j, {"model.merges", "expected an array"});
}

TEST(TokenizerJsonReject, MergeOutOfVocabulary) {
  json j = miniTokenizerJson();
  j["model"]["merges"].push_back(json::array({"w", "o"})); // "wo" absent
  expectRejected(j, {"model.merges[5]", "'wo'", "not in the vocabulary"});
  j = miniTokenizerJson();
  j["model"]["merges"].push_back(json::array({"zz", "o"}));
  expectRejected(j, {"model.merges[5]", "'zz'"});
}

TEST(TokenizerJsonReject, VocabIdOutOfRange) {
  for (json bad : {json(-1), json(int64_t(1) << 40), json(1.5), json("3"),
                   json(uint64_t(18446744073709551615ull))}) {
    json j = miniTokenizerJson();
    j["model"]["vocab"]["xyz"] = bad;
    expectRejected(j, {"model.vocab[\"xyz\"]"});
  }
}

TEST(TokenizerJsonReject, DuplicateIds) {
  json j = miniTokenizerJson();
  j["model"]["vocab"]["xyz"] = 5;
  expectRejected(j, {"duplicate id 5"});

  j = miniTokenizerJson();
  j["added_tokens"][1]["id"] = j["added_tokens"][0]["id"];
  expectRejected(j, {"added_tokens[1].id", "duplicate id"});

  j = miniTokenizerJson();
  j["added_tokens"][0]["id"] = 3; // collides with a byte token
  expectRejected(j, {"added_tokens[0].id", "duplicate id 3"});

  j = miniTokenizerJson();
  j["added_tokens"][1]["content"] = "<|endoftext|>";
  expectRejected(j, {"added_tokens[1].content", "duplicate content"});
}

TEST(TokenizerJsonReject, AddedTokenFields) {
  json j = miniTokenizerJson();
  j["added_tokens"][0].erase("id");
  expectRejected(j, {"added_tokens[0].id", "missing"});
  j = miniTokenizerJson();
  j["added_tokens"][0]["content"] = "";
  expectRejected(j, {"added_tokens[0].content", "empty"});
  j = miniTokenizerJson();
  j["added_tokens"][0]["special"] = "yes";
  expectRejected(j, {"added_tokens[0].special", "boolean"});
}

TEST(TokenizerJsonReject, PreTokenizers) {
  json j = miniTokenizerJson();
  j["pre_tokenizer"]["pretokenizers"][0] = {{"type", "Whitespace"}};
  expectRejected(j, {"pre_tokenizer.pretokenizers[0].type", "Whitespace"});

  j = miniTokenizerJson();
  j["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "Sideways";
  expectRejected(j, {"pre_tokenizer.pretokenizers[0].behavior", "Sideways"});

  j = miniTokenizerJson();
  j["pre_tokenizer"]["pretokenizers"][0]["pattern"] = {{"Regex", "(unclosed"}};
  expectRejected(j, {"pre-tokenizer step 0", "invalid regex"});

  j = miniTokenizerJson();
  j["pre_tokenizer"]["pretokenizers"][0]["pattern"] = "\\s+";
  expectRejected(j, {"pre_tokenizer.pretokenizers[0].pattern"});

  j = miniTokenizerJson();
  j["pre_tokenizer"] = j["pre_tokenizer"]["pretokenizers"][0]; // no ByteLevel
  expectRejected(j, {"pre_tokenizer", "ByteLevel"});

  j = miniTokenizerJson();
  std::swap(j["pre_tokenizer"]["pretokenizers"][0],
            j["pre_tokenizer"]["pretokenizers"][1]);
  expectRejected(j, {"pre_tokenizer.pretokenizers[1]", "after ByteLevel"});

  j = miniTokenizerJson();
  j.erase("pre_tokenizer");
  expectRejected(j, {"pre_tokenizer", "missing"});
}

TEST(TokenizerJsonReject, NormalizerDecoderPostProcessor) {
  json j = miniTokenizerJson();
  j["normalizer"] = {{"type", "NFC"}};
  expectRejected(j, {"normalizer", "NFC"});
  j = miniTokenizerJson();
  j["decoder"] = {{"type", "WordPiece"}};
  expectRejected(j, {"decoder.type", "WordPiece"});
  j = miniTokenizerJson();
  j.erase("decoder");
  expectRejected(j, {"decoder", "missing"});
  j = miniTokenizerJson();
  j["post_processor"] = {{"type", "TemplateProcessing"}};
  expectRejected(j, {"post_processor.type", "TemplateProcessing"});
}

TEST(TokenizerJsonReject, MissingChatOrStopToken) {
  json j = miniTokenizerJson();
  json added = json::array();
  for (const json &t : j["added_tokens"])
    if (t["content"] != "<|observation|>")
      added.push_back(t);
  j["added_tokens"] = added;
  expectRejected(j, {"chat.observation", "<|observation|>"});
}

TEST(TokenizerJsonReject, MutatedJsonNeverCrashes) {
  const std::string good = miniTokenizerJson().dump();
  std::mt19937 rng(5);
  const char alphabet[] = "{}[]\":,0123456789-.eE truefalsnul\\\xC4\xA0";
  int accepted = 0;
  for (int iter = 0; iter < 400; ++iter) {
    std::string text = good;
    int edits = 1 + static_cast<int>(rng() % 3);
    for (int e = 0; e < edits; ++e)
      text[rng() % text.size()] = alphabet[rng() % (sizeof(alphabet) - 1)];
    Result<TokenizerData> data = parseTokenizerJsonText(text);
    if (!data.isOk())
      continue;
    Result<Tokenizer> t = Tokenizer::create(std::move(data).value());
    if (!t.isOk())
      continue;
    ++accepted;
    Result<std::vector<int32_t>> ids = t->encode("hello <|user|> world");
    if (ids.isOk()) {
      EXPECT_TRUE(t->decode(*ids).isOk());
    }
  }
  EXPECT_GT(accepted, 0);
}

TEST(TokenizerDataReject, CreateValidatesData) {
  Result<TokenizerData> data =
      parseTokenizerJsonText(miniTokenizerJson().dump());
  ASSERT_TRUE(data.isOk());
  {
    TokenizerData d = *data;
    d.addedTokens[0].id = static_cast<int32_t>(d.vocab.size());
    Result<Tokenizer> t = Tokenizer::create(d);
    ASSERT_FALSE(t.isOk());
    EXPECT_EQ(t.status().code(), StatusCode::OutOfRange);
    EXPECT_NE(t.status().message().find("added_tokens[0].id"),
              std::string::npos);
  }
  {
    TokenizerData d = *data;
    d.vocab[1] = d.vocab[0];
    Result<Tokenizer> t = Tokenizer::create(d);
    ASSERT_FALSE(t.isOk());
    EXPECT_NE(t.status().message().find("vocab[1]"), std::string::npos);
  }
  {
    TokenizerData d = *data;
    d.vocab[0] = "\xFF";
    Result<Tokenizer> t = Tokenizer::create(d);
    ASSERT_FALSE(t.isOk());
    EXPECT_NE(t.status().message().find("vocab[0] is not valid UTF-8"),
              std::string::npos);
  }
  {
    TokenizerData d = *data;
    d.vocab.clear();
    EXPECT_FALSE(Tokenizer::create(d).isOk());
  }
}

} // namespace
