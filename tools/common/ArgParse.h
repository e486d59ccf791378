//===- ArgParse.h - Number flags shared by the runtime tools ----*- C++ -*-===//
//
// The value parsers behind kiln-run's and kiln-serve's flags: parseInteger
// and parseByteSize return the number or the message; intFlag and bytesFlag
// throw it as a UsageError, which the tools print and exit 2 on.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TOOLS_COMMON_ARGPARSE_H
#define KILN_TOOLS_COMMON_ARGPARSE_H

#include "support/Status.h"

#include <cctype>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace kiln::tools {

/// A decimal integer in [lo, hi].
inline Result<int64_t> parseInteger(const std::string &flag,
                                    const std::string &value, int64_t lo,
                                    int64_t hi) {
  int64_t v = 0;
  const char *end = value.data() + value.size();
  auto [ptr, ec] = std::from_chars(value.data(), end, v);
  if (value.empty() || ec != std::errc() || ptr != end)
    return makeError(StatusCode::InvalidArgument, flag, ": '", value,
                     "' is not an integer");
  if (v < lo || v > hi)
    return makeError(StatusCode::InvalidArgument, flag, ": ", value,
                     " is out of range, expected ", lo, " to ", hi);
  return v;
}

/// A byte count, optionally with a binary suffix K, M or G.
inline Result<int64_t> parseByteSize(const std::string &flag,
                                     std::string value) {
  int64_t scale = 1;
  if (!value.empty()) {
    char c = char(std::toupper(static_cast<unsigned char>(value.back())));
    scale = c == 'K' ? 1 << 10 : c == 'M' ? 1 << 20 : c == 'G' ? 1 << 30 : 1;
    if (scale != 1)
      value.pop_back();
  }
  KILN_ASSIGN_OR_RETURN(
      int64_t v, parseInteger(flag, value, 1, (int64_t(1) << 50) / scale));
  return v * scale;
}

/// A usage error: message to stderr, exit 2.
struct UsageError {
  std::string message;
};

/// A tool's `parse()` of its arguments; on a UsageError, prints
/// "TOOL: message" and exits 2.
template <typename F> auto parseOrExit(const char *tool, F &&parse) {
  try {
    return parse();
  } catch (const UsageError &e) {
    std::fprintf(stderr, "%s: %s\n", tool, e.message.c_str());
    std::exit(2);
  }
}

inline int64_t intFlag(const std::string &flag, const std::string &value,
                       int64_t lo, int64_t hi) {
  Result<int64_t> v = parseInteger(flag, value, lo, hi);
  if (!v.isOk())
    throw UsageError{v.status().message()};
  return *v;
}

inline int64_t bytesFlag(const std::string &flag, const std::string &value) {
  Result<int64_t> v = parseByteSize(flag, value);
  if (!v.isOk())
    throw UsageError{v.status().message()};
  return *v;
}

} // namespace kiln::tools

#endif // KILN_TOOLS_COMMON_ARGPARSE_H
