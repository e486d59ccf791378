//===- TokenizerLimitsTest.cpp - Bounds that protect the machine ----------===//
//
// The tokenizer.json reader and the regex wrapper on hostile input: each
// limit rejects with ResourceExhausted (or InvalidArgument) and a message
// that names the limit and the value found, and deeply nested JSON never
// reaches a recursive dump().
//
//===----------------------------------------------------------------------===//

#include "runtime/tokenizer/Regex.h"
#include "test/unit/tokenizer/TokenizerTestUtil.h"

using namespace kiln;
using namespace kiln::test;
using nlohmann::json;

namespace {

void expectMessageHas(const Status &status,
                      std::initializer_list<const char *> needles) {
  for (const char *needle : needles)
    EXPECT_NE(status.message().find(needle), std::string::npos)
        << "message '" << status.message() << "' lacks '" << needle << "'";
}

// `depth` Sequences, each holding the next, around one ByteLevel.
json nestedSequences(int depth) {
  json node = {{"type", "ByteLevel"}, {"add_prefix_space", false}};
  for (int i = 0; i < depth; ++i)
    node = {{"type", "Sequence"}, {"pretokenizers", json::array({node})}};
  return node;
}

// `n` nested arrays as JSON text: "[[[...]]]".
std::string nestedArrays(size_t n) {
  return std::string(n, '[') + std::string(n, ']');
}

} // namespace

TEST(TokenizerLimits, SequenceNestingAtTheLimitIsAccepted) {
  json j = miniTokenizerJson();
  j["pre_tokenizer"] = nestedSequences(kMaxPreTokenizerDepth);
  Result<TokenizerData> data = parseTokenizerJsonText(j.dump());
  EXPECT_TRUE(data.isOk()) << data.status().toString();
}

TEST(TokenizerLimits, SequenceNestingOverTheLimitIsRejected) {
  json j = miniTokenizerJson();
  j["pre_tokenizer"] = nestedSequences(kMaxPreTokenizerDepth + 1);
  Result<TokenizerData> data = parseTokenizerJsonText(j.dump(), "tok.json");
  ASSERT_FALSE(data.isOk());
  EXPECT_EQ(data.status().code(), StatusCode::ResourceExhausted);
  expectMessageHas(data.status(),
                   {"tok.json", "kMaxPreTokenizerDepth (16)", ": 17"});
}

TEST(TokenizerLimits, VeryDeepSequenceNestingIsRejectedQuickly) {
  // 100000 levels: recursing (with a path string per level) would overflow
  // the stack or allocate O(depth^2) bytes; the limit stops at level 17.
  std::string text = "{\"pre_tokenizer\": ";
  for (int i = 0; i < 100000; ++i)
    text += "{\"type\": \"Sequence\", \"pretokenizers\": [";
  text += "{\"type\": \"ByteLevel\"}";
  for (int i = 0; i < 100000; ++i)
    text += "]}";
  json j = miniTokenizerJson();
  j.erase("pre_tokenizer");
  std::string rest = j.dump();
  text += ", " + rest.substr(1); // splice the other members in
  Result<TokenizerData> data = parseTokenizerJsonText(text);
  ASSERT_FALSE(data.isOk());
  expectMessageHas(data.status(), {"kMaxPreTokenizerDepth"});
}

TEST(TokenizerLimits, TooManyPreTokenizerStepsAreRejected) {
  json split = miniTokenizerJson()["pre_tokenizer"]["pretokenizers"][0];
  json steps = json::array();
  for (size_t i = 0; i < kMaxPreTokenizerSteps; ++i)
    steps.push_back(split);
  steps.push_back({{"type", "ByteLevel"},
                   {"add_prefix_space", false},
                   {"use_regex", false}});
  json j = miniTokenizerJson();
  j["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", steps}};
  // kMaxPreTokenizerSteps Splits and a ByteLevel that adds no step: accepted.
  Result<TokenizerData> data = parseTokenizerJsonText(j.dump());
  ASSERT_TRUE(data.isOk()) << data.status().toString();
  EXPECT_EQ(data->preTokenizer.size(), kMaxPreTokenizerSteps);

  // One more step (the ByteLevel's prefix space) is over the limit.
  j["pre_tokenizer"]["pretokenizers"].back()["add_prefix_space"] = true;
  data = parseTokenizerJsonText(j.dump());
  ASSERT_FALSE(data.isOk());
  EXPECT_EQ(data.status().code(), StatusCode::ResourceExhausted);
  expectMessageHas(data.status(), {"kMaxPreTokenizerSteps (256)", ": 257"});
}

TEST(TokenizerLimits, CreateRejectsTooManySteps) {
  // TokenizerData can also come from an artifact: create() checks again.
  Result<TokenizerData> data =
      parseTokenizerJsonText(miniTokenizerJson().dump());
  ASSERT_TRUE(data.isOk());
  data->preTokenizer.resize(kMaxPreTokenizerSteps + 1,
                            data->preTokenizer.front());
  Result<Tokenizer> t = Tokenizer::create(*data);
  ASSERT_FALSE(t.isOk());
  EXPECT_EQ(t.status().code(), StatusCode::ResourceExhausted);
  expectMessageHas(t.status(), {"kMaxPreTokenizerSteps (256)", ": 257"});
}

TEST(TokenizerLimits, VocabIdErrorNamesTheLimit) {
  json j = miniTokenizerJson();
  j["model"]["vocab"]["xyz"] = kMaxVocabSize;
  Result<TokenizerData> data = parseTokenizerJsonText(j.dump());
  ASSERT_FALSE(data.isOk());
  expectMessageHas(data.status(), {"model.vocab[\"xyz\"]",
                                   "kMaxVocabSize (16777216)", "16777216"});
}

TEST(TokenizerLimits, UnassignedIds) {
  // The mini tokenizer assigns ids 0..272 densely. One more token at a large
  // id leaves every id in between unassigned.
  json j = miniTokenizerJson();
  j["model"]["vocab"]["zz"] = 273 + kMaxUnassignedIds;
  Result<TokenizerData> data = parseTokenizerJsonText(j.dump());
  ASSERT_TRUE(data.isOk()) << data.status().toString();
  EXPECT_EQ(data->vocab.size(), static_cast<size_t>(274 + kMaxUnassignedIds));

  // A 1 KB file naming id 2^24 - 1 used to cost about 1.3 GB.
  j["model"]["vocab"]["zz"] = 274 + kMaxUnassignedIds;
  data = parseTokenizerJsonText(j.dump(), "tok.json");
  ASSERT_FALSE(data.isOk());
  EXPECT_EQ(data.status().code(), StatusCode::ResourceExhausted);
  expectMessageHas(data.status(),
                   {"tok.json", "reach 1048850", "only 274 are assigned",
                    "1048577 unassigned", "kMaxUnassignedIds (1048576)"});
}

TEST(TokenizerLimits, DeeplyNestedValuesAreNeverDumped) {
  // Each of these fields used to quote the offending value with dump(),
  // which recurses once per nesting level: 200000 levels overflowed the
  // stack. The message now describes the value by kind and size.
  const std::string deep = nestedArrays(200000);
  json marker = "DEEP";
  for (const char *where :
       {"vocab", "merges", "type", "dropout", "prefix", "normalizer"}) {
    json j = miniTokenizerJson();
    std::string w = where;
    if (w == "vocab")
      j["model"]["vocab"]["zz"] = marker;
    else if (w == "merges")
      j["model"]["merges"][0] = marker;
    else if (w == "type")
      j["model"]["type"] = marker;
    else if (w == "dropout")
      j["model"]["dropout"] = marker;
    else if (w == "prefix")
      j["model"]["continuing_subword_prefix"] = marker;
    else
      j["normalizer"] = marker;
    std::string text = j.dump();
    size_t at = text.find("\"DEEP\"");
    ASSERT_NE(at, std::string::npos);
    text.replace(at, 6, deep);
    Result<TokenizerData> data = parseTokenizerJsonText(text);
    ASSERT_FALSE(data.isOk()) << where;
    EXPECT_NE(data.status().message().find("array of 1 elements"),
              std::string::npos)
        << where << ": " << data.status().message().substr(0, 300);
    EXPECT_LT(data.status().message().size(), 1000u) << where;
  }
}

TEST(TokenizerLimits, RegexPatternLength) {
  std::string atLimit(kMaxRegexPatternBytes, 'a');
  EXPECT_TRUE(Regex::compile(atLimit, "p").isOk());
  Result<Regex> over = Regex::compile(atLimit + "a", "step 3");
  ASSERT_FALSE(over.isOk());
  EXPECT_EQ(over.status().code(), StatusCode::ResourceExhausted);
  expectMessageHas(over.status(),
                   {"step 3", "kMaxRegexPatternBytes (16384)", "16385 bytes"});
}

TEST(TokenizerLimits, RegexRejectsBackslashC) {
  // \C matches a single byte even in UTF mode and could split a character;
  // later steps match without a UTF check, so it is locked out.
  Result<Regex> r = Regex::compile("\\C", "pre-tokenizer step 0");
  ASSERT_FALSE(r.isOk());
  expectMessageHas(r.status(), {"pre-tokenizer step 0", "invalid regex"});
  json j = miniTokenizerJson();
  j["pre_tokenizer"]["pretokenizers"][0]["pattern"] = {{"Regex", "a|\\C"}};
  Result<Tokenizer> t = buildTokenizer(j);
  ASSERT_FALSE(t.isOk());
  expectMessageHas(t.status(), {"invalid regex"});
}

TEST(TokenizerLimits, RegexHeapIsBounded) {
  // (*NO_JIT) forces the interpreter, 1000 capture groups make each
  // backtracking frame about 16 KB, and a 40000-character repetition needs
  // one frame per character: 640 MB under PCRE2's default 20 GB heap limit.
  // kRegexHeapLimitKiB stops it at 256 MiB with ResourceExhausted.
  std::string pattern = "(*NO_JIT)";
  for (int i = 0; i < 1000; ++i)
    pattern += "(x)?";
  pattern += "(?:(a)|b)*c";
  Result<Regex> r = Regex::compile(pattern, "step 0");
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  RegexScratch scratch;
  std::vector<std::pair<size_t, size_t>> matches;
  Status s = r->findAll(std::string(40000, 'a') + "c", scratch, matches);
  ASSERT_FALSE(s.isOk());
  EXPECT_EQ(s.code(), StatusCode::ResourceExhausted);
  expectMessageHas(s, {"heap limit"});
  // The same pattern on a short subject still matches.
  matches.clear();
  ASSERT_TRUE(r->findAll("aac", scratch, matches).isOk());
  EXPECT_EQ(matches.size(), 1u);
}
