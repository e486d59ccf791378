//===- Chat.cpp - GLM chat layout -----------------------------------------===//

#include "runtime/tokenizer/Chat.h"

namespace kiln {

Result<std::vector<ChatPiece>>
layoutGlmChat(const ChatTokens &tokens,
              const std::vector<ChatMessage> &messages,
              bool addGenerationPrompt, bool enableThinking) {
  std::vector<ChatPiece> pieces;
  pieces.push_back({true, tokens.gmask});
  pieces.push_back({true, tokens.sop});
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage &m = messages[i];
    const std::string *roleToken = m.role == "system"      ? &tokens.system
                                   : m.role == "user"      ? &tokens.user
                                   : m.role == "assistant" ? &tokens.assistant
                                   : m.role == "observation"
                                       ? &tokens.observation
                                       : nullptr;
    if (!roleToken)
      return makeError(StatusCode::InvalidArgument, "chat messages[", i,
                       "].role: expected system, user, assistant or "
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
