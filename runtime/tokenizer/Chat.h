//===- Chat.h - GLM chat layout ---------------------------------*- C++ -*-===//
//
// The GLM chat layout (GLM.md section 7, and the fixtures' chat_template):
//
//   [gMASK]<sop>{for m: <|role|>\n content}<|assistant|>[\n<think></think>]
//
// where the trailing `\n<think></think>` is added when thinking is disabled.
// The layout is produced as pieces (token strings and plain text) so that it
// can be rendered as text or encoded without parsing special tokens inside
// message contents.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_TOKENIZER_CHAT_H
#define KILN_RUNTIME_TOKENIZER_CHAT_H

#include "support/tokenizer/TokenizerData.h"

#include <string>
#include <vector>

namespace kiln {

struct ChatMessage {
  std::string role; // system, user, assistant or observation
  std::string content;
};

/// One piece of a rendered chat: a token string of ChatTokens (`isToken`) or
/// plain text.
struct ChatPiece {
  bool isToken;
  std::string text;
};

/// Lays out `messages`; fails on an unknown role, naming the message.
Result<std::vector<ChatPiece>>
layoutGlmChat(const ChatTokens &tokens,
              const std::vector<ChatMessage> &messages,
              bool addGenerationPrompt, bool enableThinking);

/// Concatenates the pieces into the prompt text.
std::string joinChatPieces(const std::vector<ChatPiece> &pieces);

} // namespace kiln

#endif // KILN_RUNTIME_TOKENIZER_CHAT_H
