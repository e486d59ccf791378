//===- Utf8.cpp - UTF-8 validation and helpers ----------------------------===//

#include "support/tokenizer/Utf8.h"

namespace kiln {

namespace {

/// Expected length of a sequence led by `lead`, 0 if `lead` cannot lead one.
size_t sequenceLength(uint8_t lead) {
  if (lead < 0x80)
    return 1;
  if (lead >= 0xC2 && lead <= 0xDF)
    return 2;
  if (lead >= 0xE0 && lead <= 0xEF)
    return 3;
  if (lead >= 0xF0 && lead <= 0xF4)
    return 4;
  return 0;
}

/// Whether `byte` may follow `lead` as the second byte of a sequence.
bool validSecondByte(uint8_t lead, uint8_t byte) {
  switch (lead) {
  case 0xE0:
    return byte >= 0xA0 && byte <= 0xBF; // no overlongs
  case 0xED:
    return byte >= 0x80 && byte <= 0x9F; // no surrogates
  case 0xF0:
    return byte >= 0x90 && byte <= 0xBF; // no overlongs
  case 0xF4:
    return byte >= 0x80 && byte <= 0x8F; // <= U+10FFFF
  default:
    return (byte & 0xC0) == 0x80;
  }
}

} // namespace

size_t decodeUtf8(std::string_view text, size_t pos, uint32_t &codepoint) {
  if (pos >= text.size())
    return 0;
  uint8_t lead = static_cast<uint8_t>(text[pos]);
  size_t len = sequenceLength(lead);
  if (len == 0 || pos + len > text.size())
    return 0;
  if (len == 1) {
    codepoint = lead;
    return 1;
  }
  if (!validSecondByte(lead, static_cast<uint8_t>(text[pos + 1])))
    return 0;
  uint32_t cp = lead & (0x7F >> len);
  for (size_t i = 1; i < len; ++i) {
    uint8_t byte = static_cast<uint8_t>(text[pos + i]);
    if ((byte & 0xC0) != 0x80)
      return 0;
    cp = (cp << 6) | (byte & 0x3F);
  }
  codepoint = cp;
  return len;
}

size_t findInvalidUtf8(std::string_view text) {
  size_t pos = 0, size = text.size();
  while (pos < size) {
    // Fast path over ASCII.
    if (static_cast<uint8_t>(text[pos]) < 0x80) {
      ++pos;
      continue;
    }
    uint32_t cp;
    size_t len = decodeUtf8(text, pos, cp);
    if (len == 0)
      return pos;
    pos += len;
  }
  return std::string_view::npos;
}

void appendUtf8(uint32_t cp, std::string &out) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

size_t completeUtf8Prefix(std::string_view bytes) {
  size_t size = bytes.size();
  // A held-back tail is at most 3 bytes: a lead byte and up to 2
  // continuation bytes.
  size_t limit = size < 3 ? size : 3;
  for (size_t back = 1; back <= limit; ++back) {
    size_t start = size - back;
    uint8_t byte = static_cast<uint8_t>(bytes[start]);
    if ((byte & 0xC0) == 0x80)
      continue; // a continuation byte: keep looking for the lead
    size_t len = sequenceLength(byte);
    if (len <= back)
      return size; // ASCII, invalid lead, or a complete sequence
    if (back >= 2 &&
        !validSecondByte(byte, static_cast<uint8_t>(bytes[start + 1])))
      return size; // can never become valid: emit it
    return start;
  }
  return size;
}

} // namespace kiln
