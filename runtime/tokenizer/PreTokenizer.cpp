//===- PreTokenizer.cpp - Regex pre-tokenization --------------------------===//

#include "runtime/tokenizer/PreTokenizer.h"

#include <algorithm>

namespace kiln {

Result<PreTokenizer>
PreTokenizer::create(const std::vector<PreTokenizerStep> &steps) {
  if (steps.size() > kMaxPreTokenizerSteps)
    return makeError(StatusCode::ResourceExhausted,
                     "pre-tokenizer steps exceed the limit "
                     "kMaxPreTokenizerSteps (",
                     kMaxPreTokenizerSteps, "): ", steps.size());
  PreTokenizer pre;
  for (size_t i = 0; i < steps.size(); ++i) {
    const PreTokenizerStep &s = steps[i];
    Step step{s.kind, {}, s.behavior, s.invert};
    if (s.kind == PreTokenizerStep::Kind::Split) {
      KILN_ASSIGN_OR_RETURN(
          Regex regex,
          Regex::compile(s.pattern, "pre-tokenizer step " + std::to_string(i)));
      step.regex.push_back(std::move(regex));
    }
    pre.steps_.push_back(std::move(step));
  }
  return pre;
}

Status PreTokenizer::splitOne(const Step &step, std::string_view piece,
                              PreTokenizerScratch &scratch) const {
  std::vector<std::string_view> &out = scratch.next;
  if (step.kind == PreTokenizerStep::Kind::PrefixSpace) {
    if (!piece.empty() && piece.front() == ' ') {
      out.push_back(piece);
    } else {
      scratch.storage.push_back(" " + std::string(piece));
      out.push_back(scratch.storage.back());
    }
    return Status::ok();
  }

  auto &matches = scratch.matches;
  matches.clear();
  KILN_RETURN_IF_ERROR(
      step.regex.front().findAll(piece, scratch.regex, matches));
  // Hugging Face's find_matches: (range, isMatch) pieces covering `piece`,
  // folded according to the behavior; empty results are dropped.
  using Span = PreTokenizerScratch::Span;
  std::vector<Span> &spans = scratch.spans;
  spans.clear();
  size_t prev = 0;
  for (auto [begin, end] : matches) {
    if (begin != prev)
      spans.push_back({prev, begin, false});
    spans.push_back({begin, end, true});
    prev = end;
  }
  if (prev != piece.size() || piece.empty())
    spans.push_back({prev, piece.size(), false});
  if (step.invert)
    for (Span &s : spans)
      s.match = !s.match;

  size_t firstOut = out.size();
  auto emit = [&](size_t begin, size_t end) {
    out.push_back(piece.substr(begin, end - begin));
  };
  switch (step.behavior) {
  case SplitBehavior::Removed:
    for (const Span &s : spans)
      if (!s.match)
        emit(s.begin, s.end);
    break;
  case SplitBehavior::Isolated:
    for (const Span &s : spans)
      emit(s.begin, s.end);
    break;
  case SplitBehavior::MergedWithPrevious: {
    bool previousMatch = false;
    for (const Span &s : spans) {
      if (s.match && !previousMatch && out.size() > firstOut) {
        std::string_view &last = out.back();
        last =
            std::string_view(last.data(), piece.data() + s.end - last.data());
      } else {
        emit(s.begin, s.end);
      }
      previousMatch = s.match;
    }
    break;
  }
  case SplitBehavior::MergedWithNext: {
    // Folded from the back, like Hugging Face.
    bool nextMatch = false;
    size_t mark = out.size();
    for (size_t i = spans.size(); i-- > 0;) {
      const Span &s = spans[i];
      if (s.match && !nextMatch && out.size() > mark) {
        std::string_view &last = out.back();
        const char *begin = piece.data() + s.begin;
        last = std::string_view(begin, last.data() + last.size() - begin);
      } else {
        emit(s.begin, s.end);
      }
      nextMatch = s.match;
    }
    std::reverse(out.begin() + static_cast<std::ptrdiff_t>(mark), out.end());
    break;
  }
  case SplitBehavior::Contiguous: {
    bool previousMatch = false;
    for (const Span &s : spans) {
      if (s.match == previousMatch && out.size() > firstOut) {
        std::string_view &last = out.back();
        last =
            std::string_view(last.data(), piece.data() + s.end - last.data());
      } else {
        emit(s.begin, s.end);
      }
      previousMatch = s.match;
    }
    break;
  }
  }
  return Status::ok();
}

Status PreTokenizer::split(std::string_view text, PreTokenizerScratch &scratch,
                           std::vector<std::string_view> &words) const {
  scratch.storage.clear();
  words.clear();
  if (text.empty())
    return Status::ok();
  words.push_back(text);
  for (const Step &step : steps_) {
    scratch.next.clear();
    for (std::string_view piece : words)
      KILN_RETURN_IF_ERROR(splitOne(step, piece, scratch));
    words.clear();
    for (std::string_view piece : scratch.next)
      if (!piece.empty())
        words.push_back(piece);
  }
  return Status::ok();
}

} // namespace kiln
