//===- GlmOutputTest.cpp - GLM reasoning and tool-call parsing ------------===//
//
// Over the GLM outputs of glm_outputs.json: the whole text parses to what an
// OpenAI client must get, and every way of cutting it into stream pieces
// (each single cut, and one character at a time) gives deltas that add up to
// the same parse, with each tool call's name sent once and whole.
//
//===----------------------------------------------------------------------===//

#include "tools/kiln-serve/GlmOutput.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>

using namespace kiln::serve::api;
using nlohmann::json;

namespace {

const json &cases() {
  static const json data = [] {
    std::ifstream f(std::string(KILN_SOURCE_DIR) +
                    "/test/unit/serve/glm_outputs.json");
    return json::parse(f);
  }();
  return data["cases"];
}

GlmOutputOptions optionsOf(const json &c) {
  GlmOutputOptions o;
  o.reasoning = c.value("reasoning", true);
  o.startInReasoning = c.value("start_in_reasoning", false);
  o.tools = c.value("tools", false);
  for (const json &s : c.value("specs", json::array())) {
    ToolSpec spec{s["name"].get<std::string>(), {}};
    for (auto &[k, v] : s["params"].items())
      spec.paramTypes[k] = v.get<std::string>();
    o.specs.push_back(spec);
  }
  return o;
}

/// Replays the deltas of a stream the way a client assembles them.
struct Assembled {
  ParsedOutput out;
  std::string error;

  void add(const OutputDelta &d) {
    out.reasoning += d.reasoning;
    out.content += d.content;
    for (const ToolCallDelta &t : d.toolCalls) {
      if (t.index == int(out.toolCalls.size())) {
        if (t.name.empty() || t.id.empty())
          error +=
              "call " + std::to_string(t.index) + " began without name/id; ";
        out.toolCalls.push_back({t.id, t.name, ""});
      } else if (t.index != int(out.toolCalls.size()) - 1 || !t.name.empty()) {
        error += "call " + std::to_string(t.index) +
                 " out of order or named twice; ";
        continue;
      }
      out.toolCalls.back().arguments += t.arguments;
    }
  }
};

void expectSame(const ParsedOutput &a, const ParsedOutput &b,
                const std::string &where) {
  EXPECT_EQ(a.reasoning, b.reasoning) << where;
  EXPECT_EQ(a.content, b.content) << where;
  ASSERT_EQ(a.toolCalls.size(), b.toolCalls.size()) << where;
  for (size_t i = 0; i < a.toolCalls.size(); ++i) {
    EXPECT_EQ(a.toolCalls[i].id, b.toolCalls[i].id) << where;
    EXPECT_EQ(a.toolCalls[i].name, b.toolCalls[i].name) << where;
    EXPECT_EQ(a.toolCalls[i].arguments, b.toolCalls[i].arguments) << where;
  }
}

Assembled stream(const std::string &text, const std::vector<size_t> &cuts,
                 const GlmOutputOptions &o) {
  GlmOutputParser p(o);
  Assembled a;
  size_t from = 0;
  for (size_t cut : cuts) {
    a.add(p.push(std::string_view(text).substr(from, cut - from)));
    from = cut;
  }
  a.add(p.push(std::string_view(text).substr(from)));
  a.add(p.finish());
  return a;
}

TEST(GlmOutput, WholeParseIsWhatClientsExpect) {
  ASSERT_GE(cases().size(), 10u);
  for (const json &c : cases()) {
    SCOPED_TRACE(c["name"].get<std::string>());
    ParsedOutput got =
        GlmOutputParser::parse(c["text"].get<std::string>(), optionsOf(c));
    const json &e = c["expect"];
    EXPECT_EQ(got.reasoning, e["reasoning"].get<std::string>());
    EXPECT_EQ(got.content, e["content"].get<std::string>());
    ASSERT_EQ(got.toolCalls.size(), e["tool_calls"].size());
    for (size_t i = 0; i < got.toolCalls.size(); ++i) {
      EXPECT_EQ(got.toolCalls[i].name, e["tool_calls"][i]["name"]);
      EXPECT_EQ(got.toolCalls[i].arguments, e["tool_calls"][i]["arguments"]);
      EXPECT_EQ(got.toolCalls[i].id, "call_" + std::to_string(i));
      // Arguments are always a JSON object.
      json args = json::parse(got.toolCalls[i].arguments, nullptr, false);
      EXPECT_TRUE(args.is_object()) << got.toolCalls[i].arguments;
    }
  }
}

TEST(GlmOutput, EverySplitStreamsTheWholeParse) {
  for (const json &c : cases()) {
    const std::string text = c["text"].get<std::string>();
    const GlmOutputOptions o = optionsOf(c);
    const ParsedOutput whole = GlmOutputParser::parse(text, o);
    for (size_t cut = 0; cut <= text.size(); ++cut) {
      std::string where =
          c["name"].get<std::string>() + ", cut at " + std::to_string(cut);
      Assembled a = stream(text, {cut}, o);
      EXPECT_EQ(a.error, "") << where;
      expectSame(a.out, whole, where);
    }
    std::vector<size_t> everyChar;
    for (size_t i = 1; i < text.size(); ++i)
      everyChar.push_back(i);
    Assembled a = stream(text, everyChar, o);
    EXPECT_EQ(a.error, "") << c["name"];
    expectSame(a.out, whole, c["name"].get<std::string>() + ", by character");
  }
}

TEST(GlmOutput, NameIsNeverSentInPieces) {
  // A name split across many pushes (MTP emits several tokens a round, a
  // slow model one) is still sent once, whole (vLLM #39757).
  GlmOutputOptions o;
  o.tools = true;
  GlmOutputParser p(o);
  std::vector<OutputDelta> deltas;
  for (std::string_view piece :
       {"<tool_", "call>get", "_wea", "ther", "\n<arg_", "key>city</arg_key>",
        "<arg_value>Pa", "ris</arg_value>", "</tool_call>"})
    deltas.push_back(p.push(piece));
  deltas.push_back(p.finish());
  int named = 0;
  for (const OutputDelta &d : deltas)
    for (const ToolCallDelta &t : d.toolCalls)
      if (!t.name.empty()) {
        EXPECT_EQ(t.name, "get_weather");
        ++named;
      }
  EXPECT_EQ(named, 1);
  // The name goes out as soon as the newline after it arrives.
  ASSERT_EQ(deltas[4].toolCalls.size(), 1u);
  EXPECT_EQ(deltas[4].toolCalls[0].name, "get_weather");
  EXPECT_EQ(p.result().toolCalls[0].arguments, "{\"city\":\"Paris\"}");
}

} // namespace
