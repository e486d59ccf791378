//===- ByteLevel.h - GPT-2 byte-level alphabet ------------------*- C++ -*-===//
//
// The byte <-> character map of GPT-2's `bytes_to_unicode`, used by byte-level
// BPE vocabularies: every byte is represented by one printable code point
// (printable Latin-1 bytes map to themselves, the rest to U+0100..U+0143).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_SUPPORT_TOKENIZER_BYTELEVEL_H
#define KILN_SUPPORT_TOKENIZER_BYTELEVEL_H

#include <cstdint>
#include <string>
#include <string_view>

namespace kiln {

/// The code point that represents `byte` in the byte-level alphabet.
uint32_t byteLevelCodepoint(uint8_t byte);

/// The byte represented by `codepoint`, or -1 if it is not in the alphabet.
int byteLevelByte(uint32_t codepoint);

/// Appends the byte-level form (UTF-8 of the mapped code points) of `raw`.
void appendByteLevel(std::string_view raw, std::string &out);

/// Appends the raw bytes of a byte-level token. Returns false, appending
/// nothing, if `token` is not valid UTF-8 or has a character outside the
/// alphabet.
bool appendFromByteLevel(std::string_view token, std::string &out);

} // namespace kiln

#endif // KILN_SUPPORT_TOKENIZER_BYTELEVEL_H
