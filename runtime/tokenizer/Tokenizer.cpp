//===- Tokenizer.cpp - Byte-level BPE tokenizer for GLM -------------------===//

#include "runtime/tokenizer/Tokenizer.h"

#include "support/tokenizer/ByteLevel.h"
#include "support/tokenizer/Utf8.h"

#include <cstdio>

namespace kiln {

namespace {

std::string hexByte(unsigned char byte) {
  char buffer[8];
  std::snprintf(buffer, sizeof(buffer), "0x%02X", byte);
  return buffer;
}

Status checkUtf8(std::string_view text, const std::string &what) {
  size_t bad = findInvalidUtf8(text);
  if (bad == std::string_view::npos)
    return Status::ok();
  return makeError(StatusCode::InvalidArgument, what,
                   " is not valid UTF-8: byte ",
                   hexByte(static_cast<unsigned char>(text[bad])),
                   " at offset ", bad, " does not start a valid sequence");
}

} // namespace

Result<Tokenizer> Tokenizer::create(TokenizerData data,
                                    TokenizerOptions options) {
  size_t n = data.vocab.size();
  if (n == 0)
    return makeError(StatusCode::InvalidArgument,
                     "tokenizer: the vocabulary is empty");
  if (n > static_cast<size_t>(kMaxVocabSize))
    return makeError(StatusCode::ResourceExhausted, "tokenizer: vocabulary of ",
                     n, " ids exceeds the limit of ", kMaxVocabSize);
  Tokenizer t;
  t.options_ = options;
  t.idBytes_.resize(n);
  t.flags_.assign(n, 0);

  std::unordered_map<std::string, int32_t> modelIndex;
  modelIndex.reserve(n);
  for (size_t id = 0; id < n; ++id) {
    const std::string &token = data.vocab[id];
    if (token.empty())
      continue;
    KILN_RETURN_IF_ERROR(checkUtf8(token, "vocab[" + std::to_string(id) + "]"));
    auto [it, inserted] = modelIndex.emplace(token, static_cast<int32_t>(id));
    if (!inserted)
      return makeError(StatusCode::InvalidArgument, "vocab[", id, "] '", token,
                       "' duplicates vocab[", it->second, "]");
    // Like Hugging Face's ByteLevel decoder: a token with a character
    // outside the byte-level alphabet decodes to its own UTF-8 bytes.
    if (!appendFromByteLevel(token, t.idBytes_[id]))
      t.idBytes_[id] = token;
    t.flags_[id] = kAssigned;
  }
  t.tokenIndex_ = modelIndex;

  std::unordered_map<std::string, size_t> addedContent;
  for (size_t i = 0; i < data.addedTokens.size(); ++i) {
    const AddedToken &a = data.addedTokens[i];
    std::string field = "added_tokens[" + std::to_string(i) + "]";
    if (a.id < 0 || static_cast<size_t>(a.id) >= n)
      return makeError(StatusCode::OutOfRange, field, ".id: ", a.id,
                       " is outside the vocabulary [0, ", n, ")");
    if (a.content.empty())
      return makeError(StatusCode::InvalidArgument, field,
                       ".content: empty token content");
    KILN_RETURN_IF_ERROR(checkUtf8(a.content, field + ".content"));
    size_t id = static_cast<size_t>(a.id);
    if (t.flags_[id] & kAdded)
      return makeError(StatusCode::InvalidArgument, field, ".id: duplicate id ",
                       a.id);
    if (auto [it, ok] = addedContent.emplace(a.content, i); !ok)
      return makeError(StatusCode::InvalidArgument, field,
                       ".content: duplicate content '", a.content,
                       "' (also added_tokens[", it->second, "])");
    if (!data.vocab[id].empty()) {
      std::string byteLevel;
      appendByteLevel(a.content, byteLevel);
      if (data.vocab[id] != a.content && data.vocab[id] != byteLevel)
        return makeError(StatusCode::InvalidArgument, field,
                         ".id: duplicate id ", a.id, ": '", a.content,
                         "' collides with vocab[", id, "] '", data.vocab[id],
                         "'");
    }
    t.idBytes_[id] = a.content;
    t.flags_[id] = kAssigned | kAdded | (a.special ? kSpecial : 0);
    t.tokenIndex_[a.content] = a.id;
  }

  KILN_ASSIGN_OR_RETURN(t.bpe_, Bpe::create(data, modelIndex));
  KILN_ASSIGN_OR_RETURN(t.preTokenizer_,
                        PreTokenizer::create(data.preTokenizer));
  t.added_ = AddedTokenMatcher(data.addedTokens);

  // The chat layout and stop set must resolve by string.
  const ChatTokens &chat = data.chat;
  const std::pair<const char *, const std::string *> required[] = {
      {"gmask", &chat.gmask},
      {"sop", &chat.sop},
      {"system", &chat.system},
      {"user", &chat.user},
      {"assistant", &chat.assistant},
      {"observation", &chat.observation},
      {"thinkOpen", &chat.thinkOpen},
      {"thinkClose", &chat.thinkClose},
      {"eos", &chat.eos}};
  for (auto [field, token] : required)
    if (!t.tokenIndex_.count(*token))
      return makeError(StatusCode::NotFound, "chat.", field, ": token '",
                       *token, "' is not in the vocabulary");
  if (chat.stop.empty())
    return makeError(StatusCode::InvalidArgument,
                     "chat.stop: the stop set is empty");
  for (size_t i = 0; i < chat.stop.size(); ++i) {
    auto it = t.tokenIndex_.find(chat.stop[i]);
    if (it == t.tokenIndex_.end())
      return makeError(StatusCode::NotFound, "chat.stop[", i, "]: token '",
                       chat.stop[i], "' is not in the vocabulary");
    t.stopIds_.push_back(it->second);
    t.flags_[static_cast<size_t>(it->second)] |= kStop;
  }
  t.eosId_ = t.tokenIndex_.at(chat.eos);
  t.data_ = std::move(data);
  return t;
}

Status Tokenizer::appendText(std::string_view text, bool parseSpecial,
                             std::vector<int32_t> &out) const {
  std::vector<TextSegment> segments;
  added_.split(text, parseSpecial, segments);
  PreTokenizerScratch preScratch;
  BpeScratch bpeScratch;
  std::vector<std::string_view> words;
  for (const TextSegment &segment : segments) {
    if (segment.id >= 0) {
      out.push_back(segment.id);
      continue;
    }
    KILN_RETURN_IF_ERROR(preTokenizer_.split(
        text.substr(segment.begin, segment.end - segment.begin), preScratch,
        words));
    for (std::string_view word : words)
      KILN_RETURN_IF_ERROR(bpe_.encodeWord(word, bpeScratch, out));
  }
  return Status::ok();
}

Result<std::vector<int32_t>> Tokenizer::encode(std::string_view text,
                                               bool parseSpecial) const {
  if (text.size() > options_.maxInputBytes)
    return makeError(StatusCode::ResourceExhausted, "tokenizer input of ",
                     text.size(),
                     " bytes exceeds maxInputBytes = ", options_.maxInputBytes);
  KILN_RETURN_IF_ERROR(checkUtf8(text, "tokenizer input"));
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 1);
  KILN_RETURN_IF_ERROR(appendText(text, parseSpecial, ids));
  return ids;
}

Result<std::string_view> Tokenizer::tokenBytes(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= idBytes_.size())
    return makeError(StatusCode::OutOfRange, "token id ", id,
                     " is outside the vocabulary [0, ", idBytes_.size(), ")");
  if (!(flags_[static_cast<size_t>(id)] & kAssigned))
    return makeError(StatusCode::NotFound, "token id ", id,
                     " is not assigned to any token");
  return std::string_view(idBytes_[static_cast<size_t>(id)]);
}

Result<std::string> Tokenizer::decode(const int32_t *ids, size_t count,
                                      bool skipSpecial) const {
  std::string text;
  for (size_t i = 0; i < count; ++i) {
    Result<std::string_view> bytes = tokenBytes(ids[i]);
    if (!bytes.isOk())
      return bytes.status().withContext("decode: ids[" + std::to_string(i) +
                                        "]");
    if (skipSpecial && isSpecial(ids[i]))
      continue;
    text.append(bytes->data(), bytes->size());
  }
  return text;
}

Result<std::string> Tokenizer::idToToken(int32_t id) const {
  KILN_ASSIGN_OR_RETURN(std::string_view bytes, tokenBytes(id));
  if (flags_[static_cast<size_t>(id)] & kAdded)
    return std::string(bytes);
  return data_.vocab[static_cast<size_t>(id)];
}

Result<int32_t> Tokenizer::tokenToId(const std::string &token) const {
  auto it = tokenIndex_.find(token);
  if (it == tokenIndex_.end())
    return makeError(StatusCode::NotFound, "token '", token,
                     "' is not in the vocabulary");
  return it->second;
}

bool Tokenizer::isSpecial(int32_t id) const {
  return id >= 0 && static_cast<size_t>(id) < flags_.size() &&
         (flags_[static_cast<size_t>(id)] & kSpecial);
}

bool Tokenizer::isStop(int32_t id) const {
  return id >= 0 && static_cast<size_t>(id) < flags_.size() &&
         (flags_[static_cast<size_t>(id)] & kStop);
}

Result<std::string>
Tokenizer::renderChat(const std::vector<ChatMessage> &messages,
                      bool addGenerationPrompt, bool enableThinking,
                      const std::vector<std::string> &tools) const {
  KILN_ASSIGN_OR_RETURN(std::vector<ChatPiece> pieces,
                        layoutGlmChat(data_.chat, messages, addGenerationPrompt,
                                      enableThinking, tools));
  return joinChatPieces(pieces);
}

Result<std::vector<int32_t>>
Tokenizer::encodeChat(const std::vector<ChatMessage> &messages,
                      bool addGenerationPrompt, bool enableThinking,
                      const std::vector<std::string> &tools) const {
  KILN_ASSIGN_OR_RETURN(std::vector<ChatPiece> pieces,
                        layoutGlmChat(data_.chat, messages, addGenerationPrompt,
                                      enableThinking, tools));
  size_t total = 0;
  for (const ChatPiece &p : pieces)
    total += p.text.size();
  if (total > options_.maxInputBytes)
    return makeError(StatusCode::ResourceExhausted, "chat prompt of ", total,
                     " bytes exceeds maxInputBytes = ", options_.maxInputBytes);
  std::vector<int32_t> ids;
  for (size_t i = 0; i < pieces.size(); ++i) {
    const ChatPiece &p = pieces[i];
    if (p.isToken) {
      KILN_ASSIGN_OR_RETURN(int32_t id, tokenToId(p.text));
      ids.push_back(id);
      continue;
    }
    if (p.isMarkup) { // an added token in GLM-4.5+ vocabularies
      Result<int32_t> id = tokenToId(p.text);
      if (id.isOk() && (flags_[size_t(*id)] & kAdded)) {
        ids.push_back(*id);
        continue;
      }
    }
    KILN_RETURN_IF_ERROR(checkUtf8(p.text, "chat message text"));
    KILN_RETURN_IF_ERROR(appendText(p.text, /*parseSpecial=*/false, ids));
  }
  return ids;
}

Result<std::string> StreamDecoder::push(int32_t id) {
  KILN_ASSIGN_OR_RETURN(std::string_view bytes, tokenizer_->tokenBytes(id));
  if (skipSpecial_ && tokenizer_->isSpecial(id))
    return std::string();
  pending_.append(bytes.data(), bytes.size());
  size_t complete = completeUtf8Prefix(pending_);
  std::string ready = pending_.substr(0, complete);
  pending_.erase(0, complete);
  return ready;
}

std::string StreamDecoder::flush() {
  std::string rest;
  rest.swap(pending_);
  return rest;
}

} // namespace kiln
