//===- Regex.h - PCRE2 wrapper for pre-tokenizer patterns -------*- C++ -*-===//
//
// Compiles a pattern with PCRE2_UTF | PCRE2_UCP (and the JIT when the library
// has one) and enumerates its matches. A compiled Regex is immutable and can
// be shared by threads; per-call state lives in a RegexScratch.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_TOKENIZER_REGEX_H
#define KILN_RUNTIME_TOKENIZER_REGEX_H

#include "support/Status.h"

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kiln {

/// Per-thread match state (PCRE2 match data and, on demand, a larger JIT
/// stack). Reuse one across calls to avoid allocations.
class RegexScratch {
public:
  RegexScratch();
  ~RegexScratch();
  RegexScratch(const RegexScratch &) = delete;
  RegexScratch &operator=(const RegexScratch &) = delete;

private:
  friend class Regex;
  struct State;
  std::unique_ptr<State> state_;
};

/// Rewrites a Hugging Face (Oniguruma) pattern for PCRE2: `\s` / `\S` become
/// `\p{White_Space}` / `\P{White_Space}`, because PCRE2's UCP `\s` also
/// matches U+180E (MONGOLIAN VOWEL SEPARATOR), which Oniguruma, following
/// Unicode's White_Space property, does not. Text in `\Q...\E` is kept.
std::string onigurumaToPcre2(const std::string &pattern);

/// The longest pattern compiled (GLM's is about 150 bytes; PCRE2's own
/// limit on the compiled size is near 64 KiB).
inline constexpr size_t kMaxRegexPatternBytes = 16 * 1024;
/// Limits on one pcre2_match call, set in the match context (a pattern's
/// (*LIMIT_...) can only lower them). Match and depth are PCRE2's defaults,
/// made explicit. The heap limit matters: PCRE2's default is 20 GB, and a
/// pattern can force the interpreter with (*NO_JIT) and make every
/// backtracking frame large with many capture groups (2000 groups and a
/// 60 KB input took 10 GB and a minute); over a limit the call fails with
/// ResourceExhausted.
inline constexpr uint32_t kRegexMatchLimit = 10000000;
inline constexpr uint32_t kRegexDepthLimit = 10000000;
inline constexpr uint32_t kRegexHeapLimitKiB = 256 * 1024;

class Regex {
public:
  /// Compiles `pattern` (after onigurumaToPcre2); `context` names it in
  /// errors (e.g. the JSON field). Patterns longer than
  /// kMaxRegexPatternBytes are rejected, and so is \C: it matches one byte
  /// even in UTF mode, which could split a character and hand invalid UTF-8
  /// to the next step (matched without a UTF check).
  static Result<Regex> compile(const std::string &pattern,
                               const std::string &context);

  Regex(Regex &&) noexcept;
  Regex &operator=(Regex &&) noexcept;
  ~Regex();

  /// Appends the [begin, end) byte offsets of the successive non-overlapping
  /// matches in `subject`, which must be valid UTF-8 (checked by the caller).
  /// Empty matches are reported; the search then resumes one character on.
  Status findAll(std::string_view subject, RegexScratch &scratch,
                 std::vector<std::pair<size_t, size_t>> &matches) const;

  bool usesJit() const { return jit_; }
  const std::string &pattern() const { return pattern_; }

private:
  Regex() = default;
  struct Code;
  std::unique_ptr<Code> code_;
  std::string pattern_;
  bool jit_ = false;
};

} // namespace kiln

#endif // KILN_RUNTIME_TOKENIZER_REGEX_H
