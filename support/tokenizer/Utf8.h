//===- Utf8.h - UTF-8 validation and helpers --------------------*- C++ -*-===//
//
// Strict UTF-8 (RFC 3629: no overlongs, no surrogates, nothing above
// U+10FFFF) helpers shared by the tokenizer and its stream decoder.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_SUPPORT_TOKENIZER_UTF8_H
#define KILN_SUPPORT_TOKENIZER_UTF8_H

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace kiln {

/// Offset of the first byte that does not start a valid UTF-8 sequence, or
/// std::string_view::npos when `text` is entirely valid.
size_t findInvalidUtf8(std::string_view text);

/// Length of the sequence starting at text[pos] if it is a valid, complete
/// UTF-8 sequence; 0 otherwise. Stores the code point in `codepoint`.
size_t decodeUtf8(std::string_view text, size_t pos, uint32_t &codepoint);

/// Appends the UTF-8 encoding of `codepoint` (which must be <= 0x10FFFF).
void appendUtf8(uint32_t codepoint, std::string &out);

/// The length of the longest prefix of `bytes` that does not end inside an
/// incomplete UTF-8 sequence that could still become valid with more bytes.
/// Invalid bytes are never held back.
size_t completeUtf8Prefix(std::string_view bytes);

} // namespace kiln

#endif // KILN_SUPPORT_TOKENIZER_UTF8_H
