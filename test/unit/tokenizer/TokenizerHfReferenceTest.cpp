//===- TokenizerHfReferenceTest.cpp - Against Hugging Face's own ids ------===//
//
// data/hf_cases.json holds random Unicode texts (all planes, every kind of
// whitespace, GLM special tokens) with the ids that Hugging Face's tokenizers
// library (the Rust implementation, via npm `tokenizers`) gives for them with
// glm5-tiny-dev/tokenizer.json; data/gen_hf_cases.js regenerates it.
//
//===----------------------------------------------------------------------===//

#include "runtime/tokenizer/Regex.h"
#include "test/unit/tokenizer/TokenizerTestUtil.h"

using namespace kiln;
using namespace kiln::test;
using nlohmann::json;

namespace {

TEST(HfReference, RandomUnicodeMatchesHuggingFace) {
  Result<Tokenizer> tok = loadFixtureTokenizer("glm5-tiny-dev");
  ASSERT_TRUE(tok.isOk()) << tok.status().toString();
  std::string path =
      std::string(KILN_SOURCE_DIR) + "/test/unit/tokenizer/data/hf_cases.json";
  std::string text = readFile(path);
  ASSERT_FALSE(text.empty()) << "cannot read " << path;
  json cases = json::parse(text)["cases"];
  ASSERT_GE(cases.size(), 600u);
  int mismatches = 0;
  for (const json &c : cases) {
    std::string input = c["text"].get<std::string>();
    auto expected = c["ids"].get<std::vector<int32_t>>();
    Result<std::vector<int32_t>> ids = tok->encode(input, true);
    ASSERT_TRUE(ids.isOk()) << ids.status().toString();
    if (*ids != expected && ++mismatches <= 5)
      ADD_FAILURE() << "mismatch for " << json(input).dump()
                    << "\n  hf: " << json(expected).dump()
                    << "\n  us: " << json(*ids).dump();
    Result<std::string> back = tok->decode(*ids);
    ASSERT_TRUE(back.isOk());
    EXPECT_EQ(*back, input);
  }
  EXPECT_EQ(mismatches, 0);
}

TEST(HfReference, WhitespaceClassRewrite) {
  EXPECT_EQ(onigurumaToPcre2("\\s+(?!\\S)|[^\\s\\p{L}]"),
            "\\p{White_Space}+(?!\\P{White_Space})|[^\\p{White_Space}\\p{L}]");
  // Escaped backslashes and \Q...\E literals are left alone.
  EXPECT_EQ(onigurumaToPcre2("\\\\s\\Q\\s\\E\\s"),
            "\\\\s\\Q\\s\\E\\p{White_Space}");
  EXPECT_EQ(onigurumaToPcre2("a\\"), "a\\");
}

} // namespace
