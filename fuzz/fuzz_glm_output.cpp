//===- fuzz_glm_output.cpp - GLM reasoning and tool-call parsing ----------===//
//
// Byte 0 holds flags (bit 0: reasoning, 1: start inside <think>, 2: tools)
// and byte 1 a cut position; the rest is model output. Properties
// (GlmOutput.h): the whole parse equals the parse streamed in two pieces cut
// there and the parse streamed one byte at a time; every tool call's
// arguments are a JSON object; each call's name is sent once, in the delta
// that opens it.
//
//===----------------------------------------------------------------------===//

#include "fuzz/FuzzUtil.h"
#include "tools/kiln-serve/GlmOutput.h"

#include <nlohmann/json.hpp>

using namespace kiln::serve::api;

namespace {

ParsedOutput streamed(std::string_view text, const std::vector<size_t> &cuts,
                      const GlmOutputOptions &o) {
  GlmOutputParser p(o);
  ParsedOutput a;
  auto add = [&](const OutputDelta &d) {
    a.reasoning += d.reasoning;
    a.content += d.content;
    for (const ToolCallDelta &t : d.toolCalls) {
      if (t.index == int(a.toolCalls.size())) {
        KILN_FUZZ_CHECK(!t.id.empty(), "call %d opened without an id", t.index);
        a.toolCalls.push_back({t.id, t.name, ""});
      } else {
        KILN_FUZZ_CHECK(t.index + 1 == int(a.toolCalls.size()) &&
                            t.id.empty() && t.name.empty(),
                        "call %d: delta out of order or named twice", t.index);
      }
      a.toolCalls.back().arguments += t.arguments;
    }
  };
  size_t from = 0;
  for (size_t cut : cuts) {
    add(p.push(text.substr(from, cut - from)));
    from = cut;
  }
  add(p.push(text.substr(from)));
  add(p.finish());
  return a;
}

bool same(const ParsedOutput &a, const ParsedOutput &b) {
  if (a.reasoning != b.reasoning || a.content != b.content ||
      a.toolCalls.size() != b.toolCalls.size())
    return false;
  for (size_t i = 0; i < a.toolCalls.size(); ++i)
    if (a.toolCalls[i].id != b.toolCalls[i].id ||
        a.toolCalls[i].name != b.toolCalls[i].name ||
        a.toolCalls[i].arguments != b.toolCalls[i].arguments)
      return false;
  return true;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 2)
    return 0;
  GlmOutputOptions o;
  o.reasoning = data[0] & 1;
  o.startInReasoning = data[0] & 2;
  o.tools = data[0] & 4;
  o.specs = {{"f", {{"s", "string"}}}};
  std::string_view text(reinterpret_cast<const char *>(data + 2), size - 2);
  const ParsedOutput whole = GlmOutputParser::parse(text, o);
  for (const ToolCall &c : whole.toolCalls)
    KILN_FUZZ_CHECK(
        nlohmann::json::parse(c.arguments, nullptr, false).is_object(),
        "arguments are not a JSON object: %s", c.arguments.c_str());
  const size_t cut = text.empty() ? 0 : data[1] % (text.size() + 1);
  KILN_FUZZ_CHECK(same(streamed(text, {cut}, o), whole),
                  "streamed in two pieces (cut at %zu) != whole", cut);
  if (text.size() <= 4096) {
    std::vector<size_t> every;
    for (size_t i = 1; i < text.size(); ++i)
      every.push_back(i);
    KILN_FUZZ_CHECK(same(streamed(text, every, o), whole),
                    "streamed byte by byte != whole");
  }
  return 0;
}
