//===- Chat.h - GLM chat layout ---------------------------------*- C++ -*-===//
//
// The GLM chat layout (GLM.md section 7; GLM-4.6's chat_template.jinja, which
// GLM-5's community templates follow, is the reference a test renders with
// jinja2 and compares with):
//
//   [gMASK]<sop>[<|system|>\n# Tools ... <tools>\n{tool}\n...</tools> ...]
//   <|system|>\n{content}   <|user|>\n{content}
//   <|assistant|>\n<think>{reasoning}</think>[\n{content}]
//       [\n<tool_call>{name}\n(<arg_key>k</arg_key>\n<arg_value>v</arg_value>\n)*</tool_call>]*
//   <|observation|>(\n<tool_response>\n{content}\n</tool_response>)*
//   <|assistant|>[\n<think></think>]
//
// An assistant turn keeps its reasoning only after the last user message
// (the turn in progress: tool calls and their results); earlier turns get an
// empty <think></think>. Reasoning comes from `reasoning` or, without it, from
// a `<think>...</think>` at the start of the content. Consecutive tool results
// share one <|observation|>. The trailing `\n<think></think>` is added when
// thinking is disabled. Role `observation` is the raw form: `<|observation|>\n`
// and the content, as the fixtures' simpler template has it.
//
// The layout is produced as pieces so that it can be rendered as text or
// encoded without parsing special tokens inside message contents: token
// strings of ChatTokens, the template's own markup (`<tool_call>`, `<tools>`,
// ...: a token where the vocabulary has it as an added token, else text) and
// plain text.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_TOKENIZER_CHAT_H
#define KILN_RUNTIME_TOKENIZER_CHAT_H

#include "support/tokenizer/TokenizerData.h"

#include <string>
#include <vector>

namespace kiln {

/// A tool call of an earlier assistant turn: arguments as the template
/// prints them (strings as they are, other values as JSON).
struct ChatToolCall {
  std::string name;
  std::vector<std::pair<std::string, std::string>> arguments;
};

struct ChatMessage {
  std::string role; // system, user, assistant, tool or observation
  std::string content;
  /// assistant: reasoning_content, when the request carries it.
  bool hasReasoning = false;
  std::string reasoning;
  std::vector<ChatToolCall> toolCalls;
};

/// One piece of a rendered chat: a token string of ChatTokens (`isToken`),
/// the template's markup (`isMarkup`) or plain text.
struct ChatPiece {
  bool isToken;
  std::string text;
  bool isMarkup = false;
};

/// Lays out `messages` with the tools' JSON definitions (one line each, as
/// the server serialized them); fails on an unknown role, naming the message.
Result<std::vector<ChatPiece>>
layoutGlmChat(const ChatTokens &tokens,
              const std::vector<ChatMessage> &messages,
              bool addGenerationPrompt, bool enableThinking,
              const std::vector<std::string> &tools = {});

/// Concatenates the pieces into the prompt text.
std::string joinChatPieces(const std::vector<ChatPiece> &pieces);

} // namespace kiln

#endif // KILN_RUNTIME_TOKENIZER_CHAT_H
