//===- ByteLevel.cpp - GPT-2 byte-level alphabet --------------------------===//

#include "support/tokenizer/ByteLevel.h"

#include "support/tokenizer/Utf8.h"

#include <array>

namespace kiln {

namespace {

struct Tables {
  std::array<uint32_t, 256> byteToCp{};
  std::array<int16_t, 512> cpToByte{}; // every mapped code point is < 512
  std::array<std::string, 256> byteToUtf8;

  Tables() {
    cpToByte.fill(-1);
    auto printable = [](int b) {
      return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) ||
             (b >= 0xAE && b <= 0xFF);
    };
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      uint32_t cp = printable(b) ? static_cast<uint32_t>(b) : next++;
      byteToCp[b] = cp;
      cpToByte[cp] = static_cast<int16_t>(b);
      appendUtf8(cp, byteToUtf8[b]);
    }
  }
};

const Tables &tables() {
  static const Tables t;
  return t;
}

} // namespace

uint32_t byteLevelCodepoint(uint8_t byte) { return tables().byteToCp[byte]; }

int byteLevelByte(uint32_t codepoint) {
  if (codepoint >= tables().cpToByte.size())
    return -1;
  return tables().cpToByte[codepoint];
}

void appendByteLevel(std::string_view raw, std::string &out) {
  const Tables &t = tables();
  for (char c : raw)
    out += t.byteToUtf8[static_cast<uint8_t>(c)];
}

bool appendFromByteLevel(std::string_view token, std::string &out) {
  size_t mark = out.size();
  size_t pos = 0;
  while (pos < token.size()) {
    uint32_t cp;
    size_t len = decodeUtf8(token, pos, cp);
    int byte = len ? byteLevelByte(cp) : -1;
    if (byte < 0) {
      out.resize(mark);
      return false;
    }
    out.push_back(static_cast<char>(byte));
    pos += len;
  }
  return true;
}

} // namespace kiln
