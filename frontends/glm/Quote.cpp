//===- Quote.cpp - Untrusted strings inside error messages ----------------===//

#include "frontends/glm/Quote.h"

namespace kiln::glm {

std::string quoteForMessage(std::string_view text, size_t maxBytes) {
  static const char kHex[] = "0123456789abcdef";
  std::string out = "'";
  size_t n = text.size() < maxBytes ? text.size() : maxBytes;
  for (size_t i = 0; i < n; ++i) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += static_cast<char>(c);
    } else {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  if (n < text.size())
    out += "...";
  out += "'";
  return out;
}

} // namespace kiln::glm
