//===- TokenizerTableTest.cpp - TokenizerData <-> the artifact table ------===//

#include "runtime/artifact/TokenizerTable.h"
#include "runtime/tokenizer/Tokenizer.h"
#include "test/unit/Fixtures.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

namespace kiln::artifact {
namespace {

/// Serializes `data` as the root of a buffer and reads it back.
Result<TokenizerData> roundTrip(const TokenizerData &data,
                                const std::string &templ = "") {
  flatbuffers::FlatBufferBuilder fbb;
  KILN_ASSIGN_OR_RETURN(auto table, tokenizerToFlatbuffer(fbb, data, templ));
  fbb.Finish(table);
  auto *t = flatbuffers::GetRoot<fb::Tokenizer>(fbb.GetBufferPointer());
  flatbuffers::Verifier verifier(fbb.GetBufferPointer(), fbb.GetSize());
  if (!verifier.VerifyTable(t))
    return Status(StatusCode::Internal, "verifier failed");
  if (!templ.empty() &&
      (!t->chat_template() || t->chat_template()->str() != templ))
    return Status(StatusCode::Internal, "chat template lost");
  return tokenizerFromFlatbuffer(*t);
}

class FixtureTokenizerTest : public ::testing::TestWithParam<const char *> {};

TEST_P(FixtureTokenizerTest, RoundTripsExactlyAndEncodesTheGoldenPrompts) {
  std::string dir = kilnFixture(GetParam());
  auto data = parseTokenizerJson(dir + "/tokenizer.json");
  ASSERT_TRUE(data.isOk()) << data.status().toString();
  auto back = roundTrip(*data, "{{ template }}");
  ASSERT_TRUE(back.isOk()) << back.status().toString();
  EXPECT_TRUE(*back == *data);
  auto tok = Tokenizer::create(std::move(back).value());
  ASSERT_TRUE(tok.isOk()) << tok.status().toString();
  std::ifstream in(dir + "/golden/prompts.json");
  ASSERT_TRUE(in) << dir;
  nlohmann::json prompts = nlohmann::json::parse(in);
  for (const auto &p : prompts) {
    auto ids = tok->encode(p["text"].get<std::string>(), true);
    ASSERT_TRUE(ids.isOk());
    EXPECT_EQ(*ids, p["token_ids"].get<std::vector<int32_t>>()) << p["name"];
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, FixtureTokenizerTest,
                         ::testing::Values("glm5-tiny-dev",
                                           "glm45-tiny-random"));

TokenizerData small() {
  TokenizerData d;
  d.vocab = {"a", "b", "ab", ""};
  d.merges = {{"a", "b"}};
  d.addedTokens = {{3, "<x>", true}};
  return d;
}

TEST(TokenizerTableTest, PreTokenizerShapesThatFit) {
  PreTokenizerStep split;
  split.pattern = "\\s+|\\S+";
  split.behavior = SplitBehavior::MergedWithNext;
  PreTokenizerStep prefix;
  prefix.kind = PreTokenizerStep::Kind::PrefixSpace;
  PreTokenizerStep gpt2;
  gpt2.pattern = kGpt2SplitPattern;
  for (auto steps :
       std::vector<std::vector<PreTokenizerStep>>{{},
                                                  {split},
                                                  {prefix},
                                                  {gpt2},
                                                  {prefix, gpt2},
                                                  {split, prefix, gpt2},
                                                  {split, gpt2}}) {
    TokenizerData d = small();
    d.preTokenizer = steps;
    auto back = roundTrip(d);
    ASSERT_TRUE(back.isOk()) << back.status().toString();
    EXPECT_TRUE(*back == d) << steps.size() << " steps";
  }
}

TEST(TokenizerTableTest, RejectsWhatTheTableCannotHold) {
  auto expectError = [](const TokenizerData &d, const std::string &part) {
    flatbuffers::FlatBufferBuilder fbb;
    auto r = tokenizerToFlatbuffer(fbb, d);
    ASSERT_FALSE(r.isOk()) << part;
    EXPECT_NE(r.status().message().find(part), std::string::npos)
        << r.status().message();
  };
  TokenizerData d = small();
  d.ignoreMerges = true;
  expectError(d, "tokenizer.ignoreMerges");
  d = small();
  d.unkToken = "<unk>";
  expectError(d, "tokenizer.unkToken");
  d = small();
  d.merges = {{"a b", "c"}};
  expectError(d, "tokenizer.merges[0]");
  d = small();
  d.chat.stop = {"<|endoftext|>"};
  expectError(d, "tokenizer.chat");
  d = small();
  PreTokenizerStep split;
  split.pattern = "x";
  split.invert = true;
  d.preTokenizer = {split};
  expectError(d, "inverted Split");
  d = small();
  split.invert = false;
  PreTokenizerStep prefix;
  prefix.kind = PreTokenizerStep::Kind::PrefixSpace;
  d.preTokenizer = {prefix, split};
  expectError(d, "tokenizer.preTokenizer[1]");
}

TEST(TokenizerTableTest, ReaderRejectsMalformedTables) {
  flatbuffers::FlatBufferBuilder fbb;
  auto merges = fbb.CreateVectorOfStrings({"ab"});
  auto t = fb::CreateTokenizer(fbb, 0, merges);
  fbb.Finish(t);
  auto r = tokenizerFromFlatbuffer(
      *flatbuffers::GetRoot<fb::Tokenizer>(fbb.GetBufferPointer()));
  ASSERT_FALSE(r.isOk());
  EXPECT_NE(r.status().message().find("tokenizer.merges[0]: 'ab'"),
            std::string::npos);

  flatbuffers::FlatBufferBuilder fbb2;
  auto pattern = fbb2.CreateString("x");
  auto behavior = fbb2.CreateString("Sideways");
  fbb2.Finish(fb::CreateTokenizer(fbb2, 0, 0, pattern, behavior));
  r = tokenizerFromFlatbuffer(
      *flatbuffers::GetRoot<fb::Tokenizer>(fbb2.GetBufferPointer()));
  ASSERT_FALSE(r.isOk());
  EXPECT_NE(r.status().message().find("tokenizer.split_behavior: 'Sideways'"),
            std::string::npos);
}

} // namespace
} // namespace kiln::artifact
