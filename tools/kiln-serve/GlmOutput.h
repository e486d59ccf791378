//===- GlmOutput.h - GLM reasoning and tool-call parsing --------*- C++ -*-===//
//
// Splits what a GLM chat model writes into OpenAI's three channels:
//
//   <think>reasoning</think>content<tool_call>name
//   <arg_key>k</arg_key>
//   <arg_value>v</arg_value>
//   </tool_call>
//
// becomes `reasoning_content`, `content` and `tool_calls[{id, type:
// "function", function: {name, arguments}}]` with `arguments` a JSON object
// as a string (../shared/SERVING.md R-API-2, R-API-9; GLM.md section 7).
//
// One parser serves both forms of a response: the whole text pushed at once,
// or the pieces of a stream as they come. The deltas of any split of the same
// text concatenate to the same result (tested at every character boundary),
// because the parser only emits what no later text can change:
//
//  * text that could be the start of a marker (`<think>`, `</think>`,
//    `<tool_call>`) is held back until it is known;
//  * reasoning is emitted without its leading and trailing whitespace, and
//    content without the newlines that open it and the whitespace before a
//    marker (the template's layout: `</think>\ncontent\n<tool_call>`), so
//    trailing whitespace is held back until a non-space follows it;
//  * a tool call's name is emitted once and whole, when the text after it
//    starts (a newline, `<arg_key>` or `</tool_call>`); each argument is
//    emitted when its `</arg_value>` arrives (`{"k":v` then `,"k":v`) and the
//    object is closed (`}`, or `{}` for a call without arguments) at
//    `</tool_call>`. A value is a JSON string when the tool's schema says the
//    parameter is a string, else the value parsed as JSON when it parses, else
//    a string.
//
// Reasoning ends at `</think>` or at `<tool_call>`, whichever comes first.
// With reasoning off (`enable_thinking: false`) `<think>` is plain content;
// without tools `<tool_call>` is plain text too. A call still open when the
// output ends (a length limit) is closed with the arguments complete so far.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TOOLS_KILN_SERVE_GLMOUTPUT_H
#define KILN_TOOLS_KILN_SERVE_GLMOUTPUT_H

#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::serve::api {

/// A tool of the request: its name and the JSON-schema type of each
/// parameter ("string", "number", ...; absent: unknown).
struct ToolSpec {
  std::string name;
  std::map<std::string, std::string> paramTypes;
};

/// A piece of one tool call: the first piece of a call carries its id and
/// name, later ones only argument text.
struct ToolCallDelta {
  int index = 0;
  std::string id, name; // first piece only
  std::string arguments;
};

/// What one push adds to each channel.
struct OutputDelta {
  std::string reasoning, content;
  std::vector<ToolCallDelta> toolCalls;
  bool empty() const {
    return reasoning.empty() && content.empty() && toolCalls.empty();
  }
};

struct ToolCall {
  std::string id, name, arguments;
};

/// Everything parsed so far: the concatenation of all deltas.
struct ParsedOutput {
  std::string reasoning, content;
  std::vector<ToolCall> toolCalls;
};

struct GlmOutputOptions {
  bool reasoning = true;         // parse <think>...</think>
  bool startInReasoning = false; // the prompt ended inside <think>
  bool tools = false;            // parse <tool_call>...</tool_call>
  std::vector<ToolSpec> specs;
  std::string idPrefix = "call_"; // tool call ids: idPrefix + index
};

class GlmOutputParser {
public:
  explicit GlmOutputParser(GlmOutputOptions options);

  /// Adds text; returns what is now certain.
  OutputDelta push(std::string_view text);
  /// The output ended: returns what was held back.
  OutputDelta finish();
  const ParsedOutput &result() const { return result_; }

  /// The whole text at once.
  static ParsedOutput parse(std::string_view text, GlmOutputOptions options);

private:
  enum class Mode { Content, Reasoning, ToolCall };
  /// A text channel: whitespace after its last non-space is held back.
  struct Channel {
    std::string pendingSpace;
    bool started = false;
  };
  OutputDelta run(bool final);
  bool runText(OutputDelta &d, bool final);
  bool runToolCall(OutputDelta &d, bool final);
  void emitText(OutputDelta &d, std::string_view text);
  void endSection(OutputDelta &d, bool outputEnds);
  void addArgument(OutputDelta &d, std::string_view key,
                   std::string_view value);
  void appendArguments(OutputDelta &d, const std::string &piece);

  GlmOutputOptions options_;
  Mode mode_;
  std::string buf_; // unprocessed text
  Channel reasoning_, content_;
  // The open tool call.
  bool nameSent_ = false;
  int argsSent_ = 0;
  ParsedOutput result_;
};

} // namespace kiln::serve::api

#endif // KILN_TOOLS_KILN_SERVE_GLMOUTPUT_H
