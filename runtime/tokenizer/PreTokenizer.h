//===- PreTokenizer.h - Regex pre-tokenization ------------------*- C++ -*-===//
//
// Applies the pre-tokenizer steps of a TokenizerData to a piece of text (the
// text between two added tokens), producing the words that BPE encodes, with
// the semantics of Hugging Face's Split and ByteLevel pre-tokenizers.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_TOKENIZER_PRETOKENIZER_H
#define KILN_RUNTIME_TOKENIZER_PRETOKENIZER_H

#include "runtime/tokenizer/Regex.h"
#include "support/tokenizer/TokenizerData.h"

#include <deque>
#include <string_view>
#include <vector>

namespace kiln {

/// Reusable per-call buffers; the produced words may point into `storage`.
struct PreTokenizerScratch {
  /// A matched or unmatched range of a piece.
  struct Span {
    size_t begin, end;
    bool match;
  };
  RegexScratch regex;
  std::vector<std::string_view> next;
  std::vector<std::pair<size_t, size_t>> matches;
  std::vector<Span> spans;
  std::deque<std::string> storage; // space-prefixed copies
};

class PreTokenizer {
public:
  static Result<PreTokenizer>
  create(const std::vector<PreTokenizerStep> &steps);

  /// Replaces `words` with the non-empty words of `text` (valid UTF-8). The
  /// views point into `text` or `scratch.storage`, valid until the next call.
  Status split(std::string_view text, PreTokenizerScratch &scratch,
               std::vector<std::string_view> &words) const;

private:
  struct Step {
    PreTokenizerStep::Kind kind;
    std::vector<Regex> regex; // one element for Split steps
    SplitBehavior behavior;
    bool invert;
  };
  Status splitOne(const Step &step, std::string_view piece,
                  PreTokenizerScratch &scratch) const;

  std::vector<Step> steps_;
};

} // namespace kiln

#endif // KILN_RUNTIME_TOKENIZER_PRETOKENIZER_H
