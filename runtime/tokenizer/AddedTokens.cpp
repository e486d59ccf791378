//===- AddedTokens.cpp - Splitting text on added tokens -------------------===//

#include "runtime/tokenizer/AddedTokens.h"

#include <algorithm>

namespace kiln {

namespace {

bool isSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' ||
         c == '\f';
}

bool isWordByte(char c) {
  unsigned char u = static_cast<unsigned char>(c);
  return (u >= '0' && u <= '9') || (u >= 'a' && u <= 'z') ||
         (u >= 'A' && u <= 'Z') || u == '_' || u >= 0x80;
}

} // namespace

AddedTokenMatcher::AddedTokenMatcher(const std::vector<AddedToken> &tokens) {
  for (const AddedToken &t : tokens) {
    Entry e{t.content, t.id, t.special, t.lstrip, t.rstrip, t.singleWord};
    (t.normalized ? normalized_ : nonNormalized_).entries.push_back(e);
  }
  nonNormalized_.build();
  normalized_.build();
}

void AddedTokenMatcher::Pass::build() {
  std::stable_sort(entries.begin(), entries.end(),
                   [](const Entry &a, const Entry &b) {
                     return a.content.size() > b.content.size();
                   });
  for (uint32_t i = 0; i < entries.size(); ++i)
    byFirstByte[static_cast<unsigned char>(entries[i].content[0])].push_back(i);
}

void AddedTokenMatcher::Pass::split(std::string_view text, size_t begin,
                                    size_t end, bool parseSpecial,
                                    std::vector<TextSegment> &out) const {
  size_t textStart = begin, pos = begin;
  while (pos < end) {
    const std::vector<uint32_t> &candidates =
        byFirstByte[static_cast<unsigned char>(text[pos])];
    const Entry *found = nullptr;
    for (uint32_t index : candidates) {
      const Entry &e = entries[index];
      if (e.special && !parseSpecial)
        continue;
      if (e.content.size() <= end - pos &&
          text.compare(pos, e.content.size(), e.content) == 0) {
        found = &e;
        break;
      }
    }
    if (!found) {
      ++pos;
      continue;
    }
    size_t matchEnd = pos + found->content.size();
    if (found->singleWord && ((pos > begin && isWordByte(text[pos - 1])) ||
                              (matchEnd < end && isWordByte(text[matchEnd])))) {
      pos = matchEnd; // not a whole word: the match is dropped
      continue;
    }
    size_t start = pos;
    if (found->lstrip)
      while (start > textStart && isSpace(text[start - 1]))
        --start;
    if (found->rstrip)
      while (matchEnd < end && isSpace(text[matchEnd]))
        ++matchEnd;
    if (start > textStart)
      out.push_back({textStart, start, -1});
    out.push_back({start, matchEnd, found->id});
    textStart = pos = matchEnd;
  }
  if (textStart < end)
    out.push_back({textStart, end, -1});
}

void AddedTokenMatcher::split(std::string_view text, bool parseSpecial,
                              std::vector<TextSegment> &out) const {
  out.clear();
  nonNormalized_.split(text, 0, text.size(), parseSpecial, out);
  if (normalized_.entries.empty())
    return;
  std::vector<TextSegment> first;
  first.swap(out);
  for (const TextSegment &s : first) {
    if (s.id >= 0)
      out.push_back(s);
    else
      normalized_.split(text, s.begin, s.end, parseSpecial, out);
  }
}

} // namespace kiln
