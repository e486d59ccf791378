//===- GlmOutput.cpp ------------------------------------------------------===//

#include "tools/kiln-serve/GlmOutput.h"

#include <nlohmann/json.hpp>

#include <algorithm>

using namespace kiln::serve::api;

namespace {

constexpr std::string_view kThinkOpen = "<think>", kThinkClose = "</think>",
                           kCallOpen = "<tool_call>",
                           kCallClose = "</tool_call>", kKeyOpen = "<arg_key>",
                           kKeyClose = "</arg_key>", kValueOpen = "<arg_value>",
                           kValueClose = "</arg_value>";

bool isSpace(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && isSpace(s.front()))
    s.remove_prefix(1);
  while (!s.empty() && isSpace(s.back()))
    s.remove_suffix(1);
  return s;
}

/// Length of the longest end of `s` that starts one of `markers` (and is
/// shorter than it): text that must wait for the next piece.
size_t heldBack(std::string_view s,
                const std::vector<std::string_view> &markers) {
  size_t hold = 0;
  for (std::string_view m : markers)
    for (size_t n = std::min(s.size(), m.size() - 1); n > hold; --n)
      if (s.substr(s.size() - n) == m.substr(0, n)) {
        hold = n;
        break;
      }
  return hold;
}

} // namespace

GlmOutputParser::GlmOutputParser(GlmOutputOptions options)
    : options_(std::move(options)),
      mode_(options_.reasoning && options_.startInReasoning ? Mode::Reasoning
                                                            : Mode::Content) {}

OutputDelta GlmOutputParser::push(std::string_view text) {
  buf_.append(text);
  return run(/*final=*/false);
}

OutputDelta GlmOutputParser::finish() { return run(/*final=*/true); }

ParsedOutput GlmOutputParser::parse(std::string_view text,
                                    GlmOutputOptions options) {
  GlmOutputParser p(std::move(options));
  p.push(text);
  p.finish();
  return p.result();
}

OutputDelta GlmOutputParser::run(bool final) {
  OutputDelta d;
  while (mode_ == Mode::ToolCall ? runToolCall(d, final) : runText(d, final)) {
  }
  return d;
}

void GlmOutputParser::emitText(OutputDelta &d, std::string_view text) {
  const bool reasoning = mode_ == Mode::Reasoning;
  Channel &ch = reasoning ? reasoning_ : content_;
  std::string &out = reasoning ? d.reasoning : d.content;
  std::string &all = reasoning ? result_.reasoning : result_.content;
  // Reasoning drops all leading space, content only the newlines the
  // template puts after </think> (an indented first line keeps its indent).
  size_t first = 0;
  if (!ch.started && ch.pendingSpace.empty())
    while (first < text.size() &&
           (reasoning ? isSpace(text[first]) : text[first] == '\n'))
      ++first;
  text.remove_prefix(first);
  size_t last = text.size();
  while (last > 0 && isSpace(text[last - 1]))
    --last;
  if (last == 0) { // only spaces: they wait for a non-space
    ch.pendingSpace.append(text);
    return;
  }
  std::string piece = ch.pendingSpace;
  piece.append(text.substr(0, last));
  ch.pendingSpace = std::string(text.substr(last));
  ch.started = true;
  out += piece;
  all += piece;
}

void GlmOutputParser::endSection(OutputDelta &d, bool outputEnds) {
  // Space before a marker is layout; content keeps its trailing space at
  // the end of the output.
  Channel &ch = mode_ == Mode::Reasoning ? reasoning_ : content_;
  if (outputEnds && mode_ == Mode::Content && ch.started) {
    d.content += ch.pendingSpace;
    result_.content += ch.pendingSpace;
  }
  ch.pendingSpace.clear();
}

bool GlmOutputParser::runText(OutputDelta &d, bool final) {
  std::vector<std::string_view> markers;
  if (mode_ == Mode::Reasoning)
    markers.push_back(kThinkClose);
  else if (options_.reasoning)
    markers.push_back(kThinkOpen);
  if (options_.tools)
    markers.push_back(kCallOpen);
  size_t at = std::string::npos;
  std::string_view found;
  for (std::string_view m : markers) {
    size_t p = buf_.find(m);
    if (p < at) {
      at = p;
      found = m;
    }
  }
  if (at == std::string::npos) {
    size_t keep = final ? 0 : heldBack(buf_, markers);
    emitText(d, std::string_view(buf_).substr(0, buf_.size() - keep));
    buf_.erase(0, buf_.size() - keep);
    if (final)
      endSection(d, /*outputEnds=*/true);
    return false;
  }
  emitText(d, std::string_view(buf_).substr(0, at));
  endSection(d, /*outputEnds=*/false);
  buf_.erase(0, at + found.size());
  if (found == kThinkOpen)
    mode_ = Mode::Reasoning;
  else if (found == kThinkClose)
    mode_ = Mode::Content;
  else {
    mode_ = Mode::ToolCall;
    nameSent_ = false;
    argsSent_ = 0;
  }
  return true;
}

void GlmOutputParser::appendArguments(OutputDelta &d,
                                      const std::string &piece) {
  const int index = int(result_.toolCalls.size()) - 1;
  if (d.toolCalls.empty() || d.toolCalls.back().index != index)
    d.toolCalls.push_back({index, "", "", ""});
  d.toolCalls.back().arguments += piece;
  result_.toolCalls.back().arguments += piece;
}

void GlmOutputParser::addArgument(OutputDelta &d, std::string_view key,
                                  std::string_view value) {
  const std::string &tool = result_.toolCalls.back().name;
  std::string name(trim(key));
  value = trim(value);
  bool isString = false;
  for (const ToolSpec &spec : options_.specs)
    if (spec.name == tool) {
      auto it = spec.paramTypes.find(name);
      isString = it != spec.paramTypes.end() && it->second == "string";
    }
  nlohmann::json v;
  if (!isString)
    v = nlohmann::json::parse(value, nullptr, /*allow_exceptions=*/false);
  if (isString || v.is_discarded())
    v = std::string(value);
  const auto replace = nlohmann::json::error_handler_t::replace;
  appendArguments(d, (argsSent_++ ? "," : "{") +
                         nlohmann::json(name).dump(-1, ' ', false, replace) +
                         ":" + v.dump(-1, ' ', false, replace));
}

bool GlmOutputParser::runToolCall(OutputDelta &d, bool final) {
  if (!nameSent_) {
    size_t end =
        std::min({buf_.find('\n'), buf_.find(kKeyOpen), buf_.find(kCallClose)});
    if (end == std::string::npos && !final)
      return false;
    end = std::min(end, buf_.size());
    ToolCall call;
    call.id = options_.idPrefix + std::to_string(result_.toolCalls.size());
    call.name = std::string(trim(std::string_view(buf_).substr(0, end)));
    d.toolCalls.push_back(
        {int(result_.toolCalls.size()), call.id, call.name, ""});
    result_.toolCalls.push_back(call);
    buf_.erase(0, end);
    nameSent_ = true;
  }
  size_t start = 0;
  while (start < buf_.size() && isSpace(buf_[start]))
    ++start;
  std::string_view rest = std::string_view(buf_).substr(start);
  auto close = [&](size_t erase) {
    appendArguments(d, argsSent_ ? "}" : "{}");
    buf_.erase(0, std::min(buf_.size(), erase));
    mode_ = Mode::Content;
    return true;
  };
  if (rest.substr(0, kCallClose.size()) == kCallClose)
    return close(start + kCallClose.size());
  if (rest.empty()) // spaces inside a call are its layout, never content
    return final ? close(buf_.size()) : false;
  if (rest.substr(0, kKeyOpen.size()) == kKeyOpen) {
    size_t keyEnd = rest.find(kKeyClose);
    size_t valueOpen = keyEnd == std::string_view::npos
                           ? keyEnd
                           : rest.find(kValueOpen, keyEnd);
    size_t valueEnd = valueOpen == std::string_view::npos
                          ? valueOpen
                          : rest.find(kValueClose, valueOpen);
    if (valueEnd == std::string_view::npos) // the output ended inside it
      return final ? close(buf_.size()) : false;
    addArgument(d, rest.substr(kKeyOpen.size(), keyEnd - kKeyOpen.size()),
                rest.substr(valueOpen + kValueOpen.size(),
                            valueEnd - valueOpen - kValueOpen.size()));
    buf_.erase(0, start + valueEnd + kValueClose.size());
    return true;
  }
  // Neither an argument nor the end: wait while it may still become one,
  // else skip the stray text up to the next tag.
  if (!final && (kCallClose.substr(0, rest.size()) == rest ||
                 kKeyOpen.substr(0, rest.size()) == rest))
    return false;
  size_t tag = rest.find('<', 1);
  if (tag != std::string_view::npos) {
    buf_.erase(0, start + tag);
    return true;
  }
  buf_.clear();
  return final ? close(0) : false;
}
