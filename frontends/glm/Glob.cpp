//===- Glob.cpp - fnmatch-style globs over module names -------------------===//

#include "frontends/glm/Glob.h"

namespace kiln::glm {

namespace {

// Matches one pattern element at `p` against `c`. Sets `next` to the index
// after the element. Returns false on mismatch.
bool matchOne(std::string_view pattern, size_t p, char c, size_t &next) {
  if (pattern[p] == '?') {
    next = p + 1;
    return true;
  }
  if (pattern[p] == '[') {
    size_t i = p + 1;
    bool negate = i < pattern.size() && pattern[i] == '!';
    if (negate)
      ++i;
    size_t first = i;
    // A ']' right after '[' or '[!' is a literal member of the set.
    size_t close = i < pattern.size() && pattern[i] == ']' ? i + 1 : i;
    while (close < pattern.size() && pattern[close] != ']')
      ++close;
    if (close < pattern.size()) {
      bool in = false;
      for (size_t j = first; j < close; ++j) {
        if (j + 2 < close && pattern[j + 1] == '-') {
          in |= pattern[j] <= c && c <= pattern[j + 2];
          j += 2;
        } else {
          in |= pattern[j] == c;
        }
      }
      next = close + 1;
      return in != negate;
    }
    // Unclosed '[': a literal.
  }
  next = p + 1;
  return pattern[p] == c;
}

} // namespace

bool globMatch(std::string_view pattern, std::string_view name) {
  size_t p = 0, n = 0;
  // Where to resume after the most recent '*': the pattern index just past
  // it, and the name index it currently absorbs up to.
  size_t starP = std::string_view::npos, starN = 0;
  while (n < name.size()) {
    if (p < pattern.size() && pattern[p] == '*') {
      starP = ++p;
      starN = n;
      continue;
    }
    size_t next;
    if (p < pattern.size() && matchOne(pattern, p, name[n], next)) {
      p = next;
      ++n;
      continue;
    }
    if (starP == std::string_view::npos)
      return false;
    p = starP;
    n = ++starN;
  }
  while (p < pattern.size() && pattern[p] == '*')
    ++p;
  return p == pattern.size();
}

bool isGlob(std::string_view pattern) {
  return pattern.find_first_of("*?[") != std::string_view::npos;
}

} // namespace kiln::glm
