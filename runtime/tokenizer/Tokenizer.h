//===- Tokenizer.h - Byte-level BPE tokenizer for GLM -----------*- C++ -*-===//
//
// The runtime tokenizer: built from a TokenizerData (parsed from
// tokenizer.json by the compiler, or read back from an artifact), it encodes
// text to ids exactly like Hugging Face's tokenizer for the supported shape,
// decodes ids to bytes, and lays out GLM chats. All methods are const and
// safe to call from several threads at once.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_TOKENIZER_TOKENIZER_H
#define KILN_RUNTIME_TOKENIZER_TOKENIZER_H

#include "runtime/tokenizer/AddedTokens.h"
#include "runtime/tokenizer/Bpe.h"
#include "runtime/tokenizer/Chat.h"
#include "runtime/tokenizer/PreTokenizer.h"
#include "support/tokenizer/TokenizerData.h"

#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace kiln {

struct TokenizerOptions {
  /// Inputs longer than this (in bytes) are rejected by encode(). BPE needs
  /// about 24 bytes of scratch per input byte of its longest word.
  size_t maxInputBytes = size_t(16) << 20;
};

class Tokenizer {
public:
  /// Validates `data` and builds the tokenizer; errors name the field.
  static Result<Tokenizer> create(TokenizerData data,
                                  TokenizerOptions options = {});

  /// Encodes UTF-8 text. Added tokens are split out first; special ones only
  /// when `parseSpecial`, otherwise they are encoded as plain text. Invalid
  /// UTF-8 and inputs over maxInputBytes are rejected.
  Result<std::vector<int32_t>> encode(std::string_view text,
                                      bool parseSpecial = true) const;

  /// Decodes ids to bytes: byte-level tokens are unmapped, added tokens
  /// rendered as their content (or skipped with `skipSpecial` if special).
  /// The result may be invalid UTF-8 if the ids split a character.
  Result<std::string> decode(const int32_t *ids, size_t count,
                             bool skipSpecial = false) const;
  Result<std::string> decode(const std::vector<int32_t> &ids,
                             bool skipSpecial = false) const {
    return decode(ids.data(), ids.size(), skipSpecial);
  }

  /// The bytes one id decodes to.
  Result<std::string_view> tokenBytes(int32_t id) const;
  /// The token string of an id: byte-level form for vocabulary tokens,
  /// content for added tokens.
  Result<std::string> idToToken(int32_t id) const;
  /// The id of a token string (added-token content or byte-level vocabulary
  /// string); NotFound if there is none.
  Result<int32_t> tokenToId(const std::string &token) const;

  bool isSpecial(int32_t id) const;
  bool isStop(int32_t id) const;
  /// Ids of ChatTokens::stop (<|endoftext|>, <|user|>, <|observation|>).
  const std::vector<int32_t> &stopIds() const { return stopIds_; }
  int32_t eosId() const { return eosId_; }
  /// One past the largest id.
  size_t vocabSize() const { return idBytes_.size(); }
  const TokenizerData &data() const { return data_; }
  const TokenizerOptions &options() const { return options_; }

  /// Renders the GLM chat prompt text (see Chat.h); `tools` are the tools'
  /// JSON definitions.
  Result<std::string>
  renderChat(const std::vector<ChatMessage> &messages, bool addGenerationPrompt,
             bool enableThinking,
             const std::vector<std::string> &tools = {}) const;
  /// Encodes the GLM chat prompt: layout tokens become their ids, the
  /// template's markup its added token where the vocabulary has one, and
  /// message contents are encoded with parseSpecial = false, so that text in
  /// a message can never inject a special token.
  Result<std::vector<int32_t>>
  encodeChat(const std::vector<ChatMessage> &messages, bool addGenerationPrompt,
             bool enableThinking,
             const std::vector<std::string> &tools = {}) const;

private:
  Tokenizer() = default;
  Status appendText(std::string_view text, bool parseSpecial,
                    std::vector<int32_t> &out) const;

  enum Flag : uint8_t { kAssigned = 1, kAdded = 2, kSpecial = 4, kStop = 8 };

  TokenizerData data_;
  TokenizerOptions options_;
  std::unordered_map<std::string, int32_t> tokenIndex_;
  std::vector<std::string> idBytes_;
  std::vector<uint8_t> flags_;
  AddedTokenMatcher added_;
  PreTokenizer preTokenizer_;
  Bpe bpe_;
  std::vector<int32_t> stopIds_;
  int32_t eosId_ = -1;
};

/// Turns a stream of ids into text that only ever ends on a complete UTF-8
/// character: bytes of a character split across tokens are held back until
/// it is complete. Bytes that can never form a valid character are passed
/// through, so the concatenation of all push() results and flush() equals
/// decode() of all ids. The Tokenizer must outlive the decoder.
class StreamDecoder {
public:
  explicit StreamDecoder(const Tokenizer &tokenizer, bool skipSpecial = false)
      : tokenizer_(&tokenizer), skipSpecial_(skipSpecial) {}

  /// Adds one id and returns the text that became complete (maybe empty).
  Result<std::string> push(int32_t id);
  /// Returns any held-back bytes (an incomplete character) and resets.
  std::string flush();
  /// Bytes currently held back.
  size_t pendingBytes() const { return pending_.size(); }

private:
  const Tokenizer *tokenizer_;
  bool skipSpecial_;
  std::string pending_;
};

} // namespace kiln

#endif // KILN_RUNTIME_TOKENIZER_TOKENIZER_H
