//===- TokenizerData.h - Serializable tokenizer description -----*- C++ -*-===//
//
// Everything the runtime needs to rebuild a byte-level BPE tokenizer, as plain
// data: the compiler parses a Hugging Face tokenizer.json into this struct and
// serializes it into the artifact; Tokenizer::create validates it again and
// builds the lookup structures.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_SUPPORT_TOKENIZER_TOKENIZERDATA_H
#define KILN_SUPPORT_TOKENIZER_TOKENIZERDATA_H

#include "support/Status.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace kiln {

/// What a Split pre-tokenizer step does with the regex matches (the names of
/// Hugging Face's SplitDelimiterBehavior).
enum class SplitBehavior {
  Removed,
  Isolated,
  MergedWithPrevious,
  MergedWithNext,
  Contiguous,
};

const char *splitBehaviorName(SplitBehavior behavior);

/// One pre-tokenizer step, applied to every piece produced so far. The
/// ByteLevel pre-tokenizer of tokenizer.json becomes an optional PrefixSpace
/// step followed, with use_regex, by a Split step with the GPT-2 pattern; its
/// byte mapping is implied (the vocabulary is byte-level).
struct PreTokenizerStep {
  enum class Kind { Split, PrefixSpace };
  Kind kind = Kind::Split;
  /// Split only: a PCRE2 pattern, compiled with PCRE2_UTF | PCRE2_UCP.
  std::string pattern;
  SplitBehavior behavior = SplitBehavior::Isolated;
  bool invert = false;

  bool operator==(const PreTokenizerStep &other) const {
    return kind == other.kind && pattern == other.pattern &&
           behavior == other.behavior && invert == other.invert;
  }
};

/// An added token of tokenizer.json ("added_tokens"); matched in the input
/// before pre-tokenization.
struct AddedToken {
  int32_t id = -1;
  std::string content; // raw UTF-8 text, not byte-level
  bool special = false;
  bool normalized = false;
  bool lstrip = false;
  bool rstrip = false;
  bool singleWord = false;

  bool operator==(const AddedToken &other) const {
    return id == other.id && content == other.content &&
           special == other.special && normalized == other.normalized &&
           lstrip == other.lstrip && rstrip == other.rstrip &&
           singleWord == other.singleWord;
  }
};

/// The token strings of the GLM chat layout and the stop set (GLM.md
/// section 7). All must be tokens of the vocabulary; they are resolved to ids
/// by string, never by a fixed id.
struct ChatTokens {
  std::string gmask = "[gMASK]";
  std::string sop = "<sop>";
  std::string system = "<|system|>";
  std::string user = "<|user|>";
  std::string assistant = "<|assistant|>";
  std::string observation = "<|observation|>";
  std::string thinkOpen = "<think>";
  std::string thinkClose = "</think>";
  std::string eos = "<|endoftext|>";
  std::vector<std::string> stop = {"<|endoftext|>", "<|user|>",
                                   "<|observation|>"};

  bool operator==(const ChatTokens &other) const {
    return gmask == other.gmask && sop == other.sop && system == other.system &&
           user == other.user && assistant == other.assistant &&
           observation == other.observation && thinkOpen == other.thinkOpen &&
           thinkClose == other.thinkClose && eos == other.eos &&
           stop == other.stop;
  }
};

struct TokenizerData {
  /// Model vocabulary indexed by id, tokens in byte-level form (as written in
  /// tokenizer.json). Its size covers every id, added tokens included; an
  /// empty string marks an id without a model-vocabulary token (an id used
  /// only by an added token, or unused).
  std::vector<std::string> vocab;
  /// BPE merges in rank order (rank = index), byte-level strings.
  std::vector<std::pair<std::string, std::string>> merges;
  /// Pre-tokenizer steps in order.
  std::vector<PreTokenizerStep> preTokenizer;
  /// Added tokens in tokenizer.json order.
  std::vector<AddedToken> addedTokens;
  /// The BPE unknown token (byte-level string), empty for none.
  std::string unkToken;
  /// BPE `ignore_merges`: a word that is a vocabulary token is emitted as is.
  bool ignoreMerges = false;
  ChatTokens chat;

  bool operator==(const TokenizerData &other) const {
    return vocab == other.vocab && merges == other.merges &&
           preTokenizer == other.preTokenizer &&
           addedTokens == other.addedTokens && unkToken == other.unkToken &&
           ignoreMerges == other.ignoreMerges && chat == other.chat;
  }
};

/// The largest vocabulary accepted (ids must be below this).
constexpr int64_t kMaxVocabSize = int64_t(1) << 24;
/// The most ids below the largest that tokenizer.json may leave without a
/// token (vocabulary or added): each still costs memory (real files leave
/// none or a few).
constexpr int64_t kMaxUnassignedIds = int64_t(1) << 20;
/// The deepest nesting of Sequence pre-tokenizers accepted in tokenizer.json
/// (the reader recurses once per level; real files nest at most 2).
constexpr int kMaxPreTokenizerDepth = 16;
/// The most pre-tokenizer steps accepted: each is applied to every piece of
/// every input (real files have 1 to 3).
constexpr size_t kMaxPreTokenizerSteps = 256;

/// GPT-2's pre-tokenizer pattern, used by a ByteLevel pre-tokenizer with
/// use_regex.
extern const char *const kGpt2SplitPattern;

/// Parses a Hugging Face tokenizer.json file (byte-level BPE only).
Result<TokenizerData> parseTokenizerJson(const std::string &path);

/// Parses tokenizer.json text; `sourceName` prefixes error messages.
Result<TokenizerData>
parseTokenizerJsonText(const std::string &text,
                       const std::string &sourceName = "tokenizer.json");

} // namespace kiln

#endif // KILN_SUPPORT_TOKENIZER_TOKENIZERDATA_H
