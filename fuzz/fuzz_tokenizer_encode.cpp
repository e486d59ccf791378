//===- fuzz_tokenizer_encode.cpp - encode / decode / stream decode --------===//
//
// With the fixture tokenizer, byte 0 of the input holds flags and the rest
// is used twice:
//  * as text: encode() must reject invalid UTF-8 and otherwise return ids
//    inside the vocabulary that decode() turns back into exactly the text
//    (the fixture's added tokens neither strip nor normalize, and every byte
//    has a byte-level token, so the round trip is exact either way
//    parseSpecial is set);
//  * as ids (16-bit values spread a little past both ends of the vocabulary,
//    or raw 32-bit values): decode() must fail exactly when some id is
//    invalid, and otherwise equal the concatenation of StreamDecoder::push()
//    results and flush(); token <-> id lookups must round-trip.
//
//===----------------------------------------------------------------------===//

#include "fuzz/FixtureTokenizer.h"
#include "support/tokenizer/Utf8.h"

#include <cstring>

using namespace kiln;

namespace {

std::vector<int32_t> idsFrom(const uint8_t *data, size_t size, bool raw,
                             size_t vocab) {
  std::vector<int32_t> ids;
  if (raw) {
    for (size_t i = 0; i + 4 <= size; i += 4) {
      int32_t id;
      std::memcpy(&id, data + i, 4);
      ids.push_back(id);
    }
  } else {
    for (size_t i = 0; i + 2 <= size; i += 2) {
      uint32_t v = data[i] | (uint32_t(data[i + 1]) << 8);
      ids.push_back(static_cast<int32_t>(v % (vocab + 16)) - 8);
    }
  }
  return ids;
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  (void)fuzz::fixtureTokenizer();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const Tokenizer &tok = fuzz::fixtureTokenizer();
  if (size == 0)
    return 0;
  uint8_t flags = data[0];
  bool parseSpecial = flags & 1, skipSpecial = flags & 2, rawIds = flags & 4;
  std::string_view text(reinterpret_cast<const char *>(data + 1), size - 1);

  // Text -> ids -> text.
  Result<std::vector<int32_t>> ids = tok.encode(text, parseSpecial);
  bool valid = findInvalidUtf8(text) == std::string_view::npos;
  KILN_FUZZ_CHECK(ids.isOk() == valid, "encode: ok=%d but valid UTF-8=%d (%s)",
                  ids.isOk(), valid, ids.status().toString().c_str());
  if (ids.isOk()) {
    for (int32_t id : *ids)
      KILN_FUZZ_CHECK(id >= 0 && static_cast<size_t>(id) < tok.vocabSize(),
                      "encode produced id %d", id);
    Result<std::string> back = tok.decode(*ids);
    KILN_FUZZ_CHECK(back.isOk(), "decode(encode(text)) failed: %s",
                    back.status().toString().c_str());
    KILN_FUZZ_CHECK(*back == text, "decode(encode(text)) != text");
  }

  // Ids -> text, whole and streamed.
  std::vector<int32_t> input =
      idsFrom(data + 1, size - 1, rawIds, tok.vocabSize());
  Result<std::string> whole = tok.decode(input, skipSpecial);
  StreamDecoder stream(tok, skipSpecial);
  std::string streamed;
  bool streamOk = true;
  for (int32_t id : input) {
    Result<std::string> piece = stream.push(id);
    if (!piece.isOk()) {
      streamOk = false;
      break;
    }
    KILN_FUZZ_CHECK(stream.pendingBytes() <= 3, "held back %zu bytes",
                    stream.pendingBytes());
    streamed += *piece;
  }
  streamed += stream.flush();
  KILN_FUZZ_CHECK(whole.isOk() == streamOk, "decode ok=%d, stream ok=%d",
                  whole.isOk(), streamOk);
  if (whole.isOk())
    KILN_FUZZ_CHECK(*whole == streamed, "streamed text differs from decode");

  for (int32_t id : input) {
    Result<std::string> token = tok.idToToken(id);
    if (!token.isOk())
      continue;
    Result<int32_t> again = tok.tokenToId(*token);
    KILN_FUZZ_CHECK(again.isOk() && *again == id, "tokenToId(idToToken(%d))",
                    id);
    (void)tok.isSpecial(id);
    (void)tok.isStop(id);
  }
  return 0;
}
