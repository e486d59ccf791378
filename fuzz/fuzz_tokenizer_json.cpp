//===- fuzz_tokenizer_json.cpp - tokenizer.json reader and builder --------===//
//
// The input is a tokenizer.json. An accepted one is built with
// Tokenizer::create, after pointing the GLM chat tokens at a token that
// exists (so that fuzzed vocabularies get past the chat check and reach
// encoding); a built tokenizer encodes and decodes a fixed sample text that
// covers added tokens, whitespace runs, digits and multi-byte characters.
//
//===----------------------------------------------------------------------===//

#include "fuzz/FuzzUtil.h"
#include "runtime/tokenizer/Tokenizer.h"

using namespace kiln;

namespace {

// A token string Tokenizer::create resolves: an added token's content or a
// model-vocabulary (byte-level) string.
std::string someToken(const TokenizerData &data) {
  for (const AddedToken &t : data.addedTokens)
    if (!t.content.empty())
      return t.content;
  for (const std::string &t : data.vocab)
    if (!t.empty())
      return t;
  return std::string();
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string text(reinterpret_cast<const char *>(data), size);
  Result<TokenizerData> parsed = parseTokenizerJsonText(text, "fuzz.json");
  if (!parsed.isOk())
    return 0;
  TokenizerData tokenizerData = std::move(*parsed);
  KILN_FUZZ_CHECK(!tokenizerData.vocab.empty(), "accepted an empty vocab");
  KILN_FUZZ_CHECK(tokenizerData.vocab.size() <=
                      static_cast<size_t>(kMaxVocabSize),
                  "vocab of %zu ids", tokenizerData.vocab.size());
  for (const AddedToken &t : tokenizerData.addedTokens)
    KILN_FUZZ_CHECK(t.id >= 0 &&
                        static_cast<size_t>(t.id) < tokenizerData.vocab.size(),
                    "added token id %d outside the vocab", t.id);

  // Keep the chat check of Tokenizer::create from rejecting most inputs:
  // unless every GLM chat token is an added token (as in GLM files), point
  // them all at one token that exists. (Decided up front, so that the data,
  // up to kMaxVocabSize strings, is moved into create() and never copied.)
  ChatTokens &chat = tokenizerData.chat;
  std::vector<std::string *> chatTokens = {
      &chat.gmask,     &chat.sop,        &chat.system,
      &chat.user,      &chat.assistant,  &chat.observation,
      &chat.thinkOpen, &chat.thinkClose, &chat.eos};
  bool glmTokens = true;
  for (const std::string *s : chatTokens) {
    bool found = false;
    for (const AddedToken &t : tokenizerData.addedTokens)
      found = found || t.content == *s;
    glmTokens = glmTokens && found;
  }
  if (!glmTokens) {
    std::string token = someToken(tokenizerData);
    for (std::string *s : chatTokens)
      *s = token;
    chat.stop = {token};
  }
  Result<Tokenizer> first = Tokenizer::create(std::move(tokenizerData));
  if (!first.isOk())
    return 0;
  const Tokenizer &tok = *first;
  static const char kSample[] =
      "Hello, world! <|user|>\n  def f(x):\n\treturn x  # 12345 "
      "\xc3\xa9t\xc3\xa9 "
      "\xe4\xb8\xad\xe6\x96\x87 \xf0\x9f\x98\x80<think></think>   end";
  for (bool parseSpecial : {false, true}) {
    Result<std::vector<int32_t>> ids = tok.encode(kSample, parseSpecial);
    if (!ids.isOk())
      continue;
    for (int32_t id : *ids)
      KILN_FUZZ_CHECK(id >= 0 && static_cast<size_t>(id) < tok.vocabSize(),
                      "encode produced id %d of %zu", id, tok.vocabSize());
    Result<std::string> back = tok.decode(*ids);
    KILN_FUZZ_CHECK(back.isOk(), "decode(encode()) failed: %s",
                    back.status().toString().c_str());
  }
  return 0;
}
