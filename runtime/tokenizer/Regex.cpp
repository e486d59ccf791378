//===- Regex.cpp - PCRE2 wrapper for pre-tokenizer patterns ---------------===//

#define PCRE2_CODE_UNIT_WIDTH 8
#include "runtime/tokenizer/Regex.h"

#include <pcre2.h>

namespace kiln {

namespace {
constexpr size_t kJitStackStart = 32 * 1024;
constexpr size_t kJitStackMax = 8 * 1024 * 1024;
} // namespace

struct Regex::Code {
  pcre2_code *code = nullptr;
  ~Code() { pcre2_code_free(code); }
};

struct RegexScratch::State {
  pcre2_match_data *matchData = nullptr;
  // The match limits, and a large JIT stack once one was needed.
  pcre2_match_context *context = nullptr;
  pcre2_jit_stack *jitStack = nullptr;
  ~State() {
    pcre2_match_data_free(matchData);
    pcre2_match_context_free(context);
    pcre2_jit_stack_free(jitStack);
  }
};

RegexScratch::RegexScratch() : state_(std::make_unique<State>()) {}
RegexScratch::~RegexScratch() = default;

Regex::Regex(Regex &&) noexcept = default;
Regex &Regex::operator=(Regex &&) noexcept = default;
Regex::~Regex() = default;

std::string onigurumaToPcre2(const std::string &pattern) {
  std::string out;
  out.reserve(pattern.size() + 32);
  bool quoted = false; // inside \Q...\E everything is literal
  for (size_t i = 0; i < pattern.size(); ++i) {
    char c = pattern[i];
    char next = i + 1 < pattern.size() ? pattern[i + 1] : '\0';
    if (c != '\\' || next == '\0' || (quoted && next != 'E')) {
      out.push_back(c);
      continue;
    }
    ++i;
    if (next == 's' || next == 'S') {
      out += next == 's' ? "\\p{White_Space}" : "\\P{White_Space}";
      continue;
    }
    if (next == 'Q' || next == 'E')
      quoted = next == 'Q';
    out.push_back(c);
    out.push_back(next);
  }
  return out;
}

Result<Regex> Regex::compile(const std::string &source,
                             const std::string &context) {
  if (source.size() > kMaxRegexPatternBytes)
    return makeError(StatusCode::ResourceExhausted, context, ": a pattern of ",
                     source.size(),
                     " bytes exceeds the limit kMaxRegexPatternBytes (",
                     kMaxRegexPatternBytes, ")");
  std::string pattern = onigurumaToPcre2(source);
  int errorCode = 0;
  PCRE2_SIZE errorOffset = 0;
  pcre2_code *code = pcre2_compile(
      reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
      PCRE2_UTF | PCRE2_UCP | PCRE2_NEVER_BACKSLASH_C, &errorCode, &errorOffset,
      nullptr);
  if (!code) {
    PCRE2_UCHAR buffer[256];
    pcre2_get_error_message(errorCode, buffer, sizeof(buffer));
    return makeError(
        StatusCode::InvalidArgument, context, ": invalid regex at offset ",
        errorOffset, ": ", reinterpret_cast<const char *>(buffer), " (pattern ",
        pattern.size() > 200 ? pattern.substr(0, 200) + "..." : pattern, ")");
  }
  Regex regex;
  regex.code_ = std::make_unique<Code>();
  regex.code_->code = code;
  regex.pattern_ = source;
  // The JIT is optional: without it pcre2_match interprets the pattern.
  regex.jit_ = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
  return regex;
}

Status Regex::findAll(std::string_view subject, RegexScratch &scratch,
                      std::vector<std::pair<size_t, size_t>> &matches) const {
  RegexScratch::State &st = *scratch.state_;
  if (!st.matchData) {
    // Two ovector pairs are enough: only the whole match is used.
    st.matchData = pcre2_match_data_create(2, nullptr);
    st.context = pcre2_match_context_create(nullptr);
    if (!st.matchData || !st.context)
      return makeError(StatusCode::ResourceExhausted,
                       "cannot allocate PCRE2 match data");
    pcre2_set_match_limit(st.context, kRegexMatchLimit);
    pcre2_set_depth_limit(st.context, kRegexDepthLimit);
    pcre2_set_heap_limit(st.context, kRegexHeapLimitKiB);
  }
  auto subjectPtr = reinterpret_cast<PCRE2_SPTR>(subject.data());
  size_t size = subject.size();
  size_t start = 0;
  while (start <= size) {
    int rc = pcre2_match(code_->code, subjectPtr, size, start,
                         PCRE2_NO_UTF_CHECK, st.matchData, st.context);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT && !st.jitStack) {
      // Retry once with a larger JIT stack.
      st.jitStack =
          pcre2_jit_stack_create(kJitStackStart, kJitStackMax, nullptr);
      if (!st.jitStack)
        return makeError(StatusCode::ResourceExhausted,
                         "cannot allocate a PCRE2 JIT stack");
      pcre2_jit_stack_assign(st.context, nullptr, st.jitStack);
      continue;
    }
    if (rc == PCRE2_ERROR_NOMATCH)
      break;
    if (rc < 0) {
      PCRE2_UCHAR buffer[256];
      pcre2_get_error_message(rc, buffer, sizeof(buffer));
      return makeError(StatusCode::ResourceExhausted,
                       "pre-tokenizer regex failed at byte ", start, " of a ",
                       size,
                       "-byte piece: ", reinterpret_cast<const char *>(buffer));
    }
    PCRE2_SIZE *ovector = pcre2_get_ovector_pointer(st.matchData);
    size_t begin = ovector[0], end = ovector[1];
    if (begin < start || end < begin || end > size)
      return makeError(StatusCode::Internal,
                       "pre-tokenizer regex reported a match outside the "
                       "subject or before the search start (\\K?)");
    matches.emplace_back(begin, end);
    if (end > begin) {
      start = end;
      continue;
    }
    // Empty match: move on by one UTF-8 character.
    if (end >= size)
      break;
    start = end + 1;
    while (start < size &&
           (static_cast<unsigned char>(subject[start]) & 0xC0) == 0x80)
      ++start;
  }
  return Status::ok();
}

} // namespace kiln
