//===- TokenizerTestUtil.h - Helpers for the tokenizer tests ----*- C++ -*-===//

#ifndef KILN_TEST_UNIT_TOKENIZER_TOKENIZERTESTUTIL_H
#define KILN_TEST_UNIT_TOKENIZER_TOKENIZERTESTUTIL_H

#include "runtime/tokenizer/Tokenizer.h"
#include "test/unit/Fixtures.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>
#include <string>

namespace kiln::test {

inline std::string readFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

/// The tokenizer of a fixture folder (e.g. "glm5-tiny-dev"); fails the test
/// on error.
inline Result<Tokenizer> loadFixtureTokenizer(const std::string &folder) {
  std::string path = kilnFixture(folder + "/tokenizer.json");
  KILN_ASSIGN_OR_RETURN(TokenizerData data, parseTokenizerJson(path));
  return Tokenizer::create(std::move(data));
}

/// A tiny byte-level tokenizer.json: all 256 byte tokens, a few merges, the
/// GLM special tokens, and the GLM Split + ByteLevel pre-tokenizer. Tests
/// mutate the returned JSON to build malformed variants.
inline nlohmann::json miniTokenizerJson() {
  using nlohmann::json;
  json vocab = json::object();
  int next = 0;
  // Bytes in GPT-2 byte-level form.
  int extra = 0;
  for (int b = 0; b < 256; ++b) {
    bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) ||
                     (b >= 0xAE && b <= 0xFF);
    uint32_t cp = printable ? static_cast<uint32_t>(b) : 256 + extra++;
    std::string s;
    if (cp < 0x80) {
      s.push_back(static_cast<char>(cp));
    } else {
      s.push_back(static_cast<char>(0xC0 | (cp >> 6)));
      s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
    vocab[s] = next++;
  }
  json merges = json::array();
  for (auto [a, b] : {std::pair<const char *, const char *>{"h", "e"},
                      {"l", "l"},
                      {"he", "ll"},
                      {"hell", "o"},
                      {"\xC4\xA0", "w"}}) { // "Ġ" "w"
    merges.push_back(json::array({a, b}));
    vocab[std::string(a) + b] = next++;
  }
  json added = json::array();
  for (const char *t :
       {"<|endoftext|>", "[MASK]", "[gMASK]", "[sMASK]", "<sop>", "<eop>",
        "<|system|>", "<|user|>", "<|assistant|>", "<|observation|>", "<think>",
        "</think>"})
    added.push_back({{"id", next++},
                     {"content", t},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", false},
                     {"special", true}});
  json glmSplit = {
      {"type", "Split"},
      {"pattern",
       {{"Regex",
         "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,"
         "3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}}},
      {"behavior", "Isolated"},
      {"invert", false}};
  json byteLevel = {{"type", "ByteLevel"},
                    {"add_prefix_space", false},
                    {"trim_offsets", true},
                    {"use_regex", false}};
  return {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", added},
      {"normalizer", nullptr},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers", json::array({glmSplit, byteLevel})}}},
      {"post_processor", {{"type", "ByteLevel"}, {"add_prefix_space", true}}},
      {"decoder", {{"type", "ByteLevel"}, {"add_prefix_space", true}}},
      {"model",
       {{"type", "BPE"},
        {"dropout", nullptr},
        {"unk_token", nullptr},
        {"continuing_subword_prefix", nullptr},
        {"end_of_word_suffix", nullptr},
        {"fuse_unk", false},
        {"byte_fallback", false},
        {"ignore_merges", false},
        {"vocab", vocab},
        {"merges", merges}}}};
}

inline Result<Tokenizer> buildTokenizer(const nlohmann::json &j) {
  KILN_ASSIGN_OR_RETURN(TokenizerData data, parseTokenizerJsonText(j.dump()));
  return Tokenizer::create(std::move(data));
}

} // namespace kiln::test

#endif // KILN_TEST_UNIT_TOKENIZER_TOKENIZERTESTUTIL_H
