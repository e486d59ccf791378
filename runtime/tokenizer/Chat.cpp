//===- Chat.cpp - GLM chat layout -----------------------------------------===//

#include "runtime/tokenizer/Chat.h"

#include <string_view>

namespace kiln {

namespace {

constexpr const char *kMarkup[] = {
    "<tools>",         "</tools>",        "<tool_call>", "</tool_call>",
    "<arg_key>",       "</arg_key>",      "<arg_value>", "</arg_value>",
    "<tool_response>", "</tool_response>"};

constexpr const char *kToolsPreamble =
    "\n# Tools\n\nYou may call one or more functions to assist with the "
    "user query.\n\nYou are provided with function signatures within "
    "<tools></tools> XML tags:\n<tools>\n";

constexpr const char *kToolsPostamble =
    "</tools>\n\nFor each function call, output the function name and "
    "arguments within the following XML format:\n<tool_call>{function-name}"
    "\n<arg_key>{arg-key-1}</arg_key>\n<arg_value>{arg-value-1}</arg_value>"
    "\n<arg_key>{arg-key-2}</arg_key>\n<arg_value>{arg-value-2}</arg_value>"
    "\n...\n</tool_call>";

bool isSpace(char c) {
  return c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\v' ||
         c == '\f';
}

std::string strip(std::string_view s) {
  while (!s.empty() && isSpace(s.front()))
    s.remove_prefix(1);
  while (!s.empty() && isSpace(s.back()))
    s.remove_suffix(1);
  return std::string(s);
}

std::string_view stripNewlines(std::string_view s, bool front) {
  while (!s.empty() && (front ? s.front() : s.back()) == '\n')
    front ? s.remove_prefix(1) : s.remove_suffix(1);
  return s;
}

/// Appends template text, its markup tags as markup pieces.
void addTemplate(std::vector<ChatPiece> &pieces, std::string_view text) {
  while (!text.empty()) {
    size_t at = std::string_view::npos, len = 0;
    for (const char *tag : kMarkup) {
      size_t p = text.find(tag);
      if (p < at) {
        at = p;
        len = std::string_view(tag).size();
      }
    }
    if (at == std::string_view::npos) {
      pieces.push_back({false, std::string(text)});
      return;
    }
    if (at > 0)
      pieces.push_back({false, std::string(text.substr(0, at))});
    pieces.push_back({false, std::string(text.substr(at, len)), true});
    text.remove_prefix(at + len);
  }
}

void addAssistant(std::vector<ChatPiece> &pieces, const ChatTokens &tokens,
                  const ChatMessage &m, bool keepReasoning) {
  std::string content = m.content, reasoning = m.reasoning;
  size_t close = content.find("</think>");
  if (!m.hasReasoning && close != std::string::npos) {
    // Reasoning left in the content: split it out as the template does.
    std::string_view before =
        stripNewlines(std::string_view(content).substr(0, close), false);
    size_t open = before.rfind("<think>");
    reasoning = std::string(stripNewlines(
        open == std::string_view::npos ? before : before.substr(open + 7),
        true));
    size_t last = content.rfind("</think>");
    content = std::string(
        stripNewlines(std::string_view(content).substr(last + 8), true));
  }
  pieces.push_back({true, tokens.assistant});
  pieces.push_back({false, "\n"});
  pieces.push_back({true, tokens.thinkOpen});
  std::string kept = keepReasoning ? strip(reasoning) : std::string();
  if (!kept.empty())
    pieces.push_back({false, kept});
  pieces.push_back({true, tokens.thinkClose});
  if (std::string body = strip(content); !body.empty())
    pieces.push_back({false, "\n" + body});
  for (const ChatToolCall &call : m.toolCalls) {
    addTemplate(pieces, "\n<tool_call>");
    pieces.push_back({false, call.name + "\n"});
    for (const auto &[key, value] : call.arguments) {
      addTemplate(pieces, "<arg_key>");
      pieces.push_back({false, key});
      addTemplate(pieces, "</arg_key>\n<arg_value>");
      pieces.push_back({false, value});
      addTemplate(pieces, "</arg_value>\n");
    }
    addTemplate(pieces, "</tool_call>");
  }
}

} // namespace

Result<std::vector<ChatPiece>>
layoutGlmChat(const ChatTokens &tokens,
              const std::vector<ChatMessage> &messages,
              bool addGenerationPrompt, bool enableThinking,
              const std::vector<std::string> &tools) {
  std::vector<ChatPiece> pieces;
  pieces.push_back({true, tokens.gmask});
  pieces.push_back({true, tokens.sop});
  if (!tools.empty()) {
    pieces.push_back({true, tokens.system});
    addTemplate(pieces, kToolsPreamble);
    for (const std::string &tool : tools)
      pieces.push_back({false, tool + "\n"});
    addTemplate(pieces, kToolsPostamble);
  }
  size_t lastUser = 0;
  bool anyUser = false;
  for (size_t i = 0; i < messages.size(); ++i)
    if (messages[i].role == "user") {
      lastUser = i;
      anyUser = true;
    }
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage &m = messages[i];
    if (m.role == "assistant") {
      addAssistant(pieces, tokens, m, !anyUser || i > lastUser);
      continue;
    }
    if (m.role == "tool") {
      if (i == 0 || messages[i - 1].role != "tool")
        pieces.push_back({true, tokens.observation});
      addTemplate(pieces, "\n<tool_response>\n");
      pieces.push_back({false, m.content});
      addTemplate(pieces, "\n</tool_response>");
      continue;
    }
    const std::string *roleToken = m.role == "system" ? &tokens.system
                                   : m.role == "user" ? &tokens.user
                                   : m.role == "observation"
                                       ? &tokens.observation
                                       : nullptr;
    if (!roleToken)
      return makeError(StatusCode::InvalidArgument, "chat messages[", i,
                       "].role: expected system, user, assistant, tool or "
                       "observation, found '",
                       m.role, "'");
    pieces.push_back({true, *roleToken});
    pieces.push_back({false, "\n" + m.content});
  }
  if (addGenerationPrompt) {
    pieces.push_back({true, tokens.assistant});
    if (!enableThinking) {
      pieces.push_back({false, "\n"});
      pieces.push_back({true, tokens.thinkOpen});
      pieces.push_back({true, tokens.thinkClose});
    }
  }
  return pieces;
}

std::string joinChatPieces(const std::vector<ChatPiece> &pieces) {
  std::string text;
  for (const ChatPiece &p : pieces)
    text += p.text;
  return text;
}

} // namespace kiln
