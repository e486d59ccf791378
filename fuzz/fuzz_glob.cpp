//===- fuzz_glob.cpp - globMatch against a reference matcher --------------===//
//
// The input is "pattern\nname". globMatch (a linear-space star-backtracking
// matcher) must agree with a straightforward dynamic program over the same
// element syntax (Glob.h: `*`, `?`, `[set]`, `[!set]`, `a-z` ranges, an
// unclosed '[' is literal) on every ASCII input; on other bytes it must
// simply return.
//
//===----------------------------------------------------------------------===//

#include "frontends/glm/Glob.h"
#include "fuzz/FuzzUtil.h"

#include <string>
#include <string_view>
#include <vector>

using namespace kiln::glm;

namespace {

struct Element {
  enum Kind { Star, Any, Set, Literal } kind;
  char literal = 0;
  bool negate = false;
  std::string members; // Set: members, with "a-z" ranges kept as 3 chars
};

std::vector<Element> elements(std::string_view p) {
  std::vector<Element> out;
  for (size_t i = 0; i < p.size();) {
    char c = p[i];
    if (c == '*') {
      out.push_back({Element::Star});
      ++i;
      continue;
    }
    if (c == '?') {
      out.push_back({Element::Any});
      ++i;
      continue;
    }
    if (c == '[') {
      size_t j = i + 1;
      bool negate = j < p.size() && p[j] == '!';
      if (negate)
        ++j;
      size_t first = j;
      if (j < p.size() && p[j] == ']')
        ++j; // a leading ']' is a member
      while (j < p.size() && p[j] != ']')
        ++j;
      if (j < p.size()) {
        Element e{Element::Set};
        e.negate = negate;
        e.members = std::string(p.substr(first, j - first));
        out.push_back(e);
        i = j + 1;
        continue;
      }
    }
    Element e{Element::Literal};
    e.literal = c;
    out.push_back(e);
    ++i;
  }
  return out;
}

bool matchesOne(const Element &e, char c) {
  switch (e.kind) {
  case Element::Any:
    return true;
  case Element::Literal:
    return e.literal == c;
  case Element::Set: {
    bool in = false;
    const std::string &m = e.members;
    for (size_t j = 0; j < m.size(); ++j) {
      if (j + 2 < m.size() && m[j + 1] == '-') {
        in = in || (m[j] <= c && c <= m[j + 2]);
        j += 2;
      } else {
        in = in || m[j] == c;
      }
    }
    return in != e.negate;
  }
  case Element::Star:
    break;
  }
  return false;
}

// match[i][j]: elements[i..] match name[j..].
bool referenceMatch(std::string_view pattern, std::string_view name) {
  std::vector<Element> el = elements(pattern);
  size_t n = name.size();
  std::vector<char> next(n + 1, 0), cur(n + 1, 0);
  next[n] = 1; // no elements left: only the empty rest matches
  for (size_t i = el.size(); i-- > 0;) {
    for (size_t j = n + 1; j-- > 0;) {
      if (el[i].kind == Element::Star)
        cur[j] = next[j] || (j < n && cur[j + 1]);
      else
        cur[j] = j < n && matchesOne(el[i], name[j]) && next[j + 1];
    }
    std::swap(cur, next);
  }
  return next[0];
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string_view input(reinterpret_cast<const char *>(data), size);
  size_t newline = input.find('\n');
  std::string_view pattern = input.substr(0, newline);
  std::string_view name = newline == std::string_view::npos
                              ? std::string_view()
                              : input.substr(newline + 1);
  if (pattern.size() > 512 || name.size() > 512)
    return 0; // the reference is quadratic
  bool got = globMatch(pattern, name);
  (void)isGlob(pattern);
  for (char c : input)
    if (static_cast<unsigned char>(c) >= 0x80)
      return 0;
  bool want = referenceMatch(pattern, name);
  KILN_FUZZ_CHECK(got == want, "globMatch(\"%.*s\", \"%.*s\") = %d, want %d",
                  static_cast<int>(pattern.size()), pattern.data(),
                  static_cast<int>(name.size()), name.data(), got, want);
  return 0;
}
