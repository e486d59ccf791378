//===- Quote.h - Untrusted strings inside error messages --------*- C++ -*-===//
//
// Names read from a checkpoint are untrusted: they may be huge or hold
// control bytes. quoteForMessage() makes them safe to put in a Status message.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_FRONTENDS_GLM_QUOTE_H
#define KILN_FRONTENDS_GLM_QUOTE_H

#include <string>
#include <string_view>

namespace kiln::glm {

/// Returns `text` in single quotes, with bytes outside printable ASCII written
/// as \xNN and anything past `maxBytes` replaced by "...".
std::string quoteForMessage(std::string_view text, size_t maxBytes = 160);

} // namespace kiln::glm

#endif // KILN_FRONTENDS_GLM_QUOTE_H
