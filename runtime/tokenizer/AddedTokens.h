//===- AddedTokens.h - Splitting text on added tokens -----------*- C++ -*-===//
//
// Finds added tokens in the input before pre-tokenization, like Hugging
// Face's AddedVocabulary: leftmost-longest matching, non-normalized tokens
// first and normalized ones in the remaining text, with lstrip / rstrip /
// single_word. Special tokens are matched only when asked to.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_TOKENIZER_ADDEDTOKENS_H
#define KILN_RUNTIME_TOKENIZER_ADDEDTOKENS_H

#include "support/tokenizer/TokenizerData.h"

#include <array>
#include <string_view>
#include <vector>

namespace kiln {

/// A range of the input: an added token (id >= 0) or text to pre-tokenize
/// (id == -1).
struct TextSegment {
  size_t begin;
  size_t end;
  int32_t id;
};

class AddedTokenMatcher {
public:
  AddedTokenMatcher() = default;
  explicit AddedTokenMatcher(const std::vector<AddedToken> &tokens);

  /// Replaces `out` with the segments of `text`, in order, covering it.
  void split(std::string_view text, bool parseSpecial,
             std::vector<TextSegment> &out) const;

private:
  struct Entry {
    std::string content;
    int32_t id;
    bool special, lstrip, rstrip, singleWord;
  };
  /// Tokens of one pass, indexed by first byte, longest first.
  struct Pass {
    std::vector<Entry> entries;
    std::array<std::vector<uint32_t>, 256> byFirstByte;
    void build();
    void split(std::string_view text, size_t begin, size_t end,
               bool parseSpecial, std::vector<TextSegment> &out) const;
  };
  Pass nonNormalized_, normalized_;
};

} // namespace kiln

#endif // KILN_RUNTIME_TOKENIZER_ADDEDTOKENS_H
