//===- TokenizerTable.cpp - TokenizerData <-> the artifact table ----------===//

#include "runtime/artifact/TokenizerTable.h"

#include <cstring>

namespace kiln::artifact {
namespace {

using flatbuffers::FlatBufferBuilder;
using flatbuffers::Offset;

constexpr struct {
  SplitBehavior behavior;
  const char *name;
} kBehaviors[] = {
    {SplitBehavior::Removed, "Removed"},
    {SplitBehavior::Isolated, "Isolated"},
    {SplitBehavior::MergedWithPrevious, "MergedWithPrevious"},
    {SplitBehavior::MergedWithNext, "MergedWithNext"},
    {SplitBehavior::Contiguous, "Contiguous"},
};

const char *behaviorName(SplitBehavior behavior) {
  for (const auto &b : kBehaviors)
    if (b.behavior == behavior)
      return b.name;
  return nullptr;
}

bool isGpt2Split(const PreTokenizerStep &step) {
  return step.kind == PreTokenizerStep::Kind::Split &&
         step.pattern == kGpt2SplitPattern &&
         step.behavior == SplitBehavior::Isolated && !step.invert;
}

Status unsupported(const std::string &field, const std::string &what) {
  return makeError(StatusCode::InvalidArgument, "tokenizer.", field, ": ", what,
                   " cannot be stored in the artifact's tokenizer table");
}

/// The table's view of the pre-tokenizer: [Split]? [PrefixSpace]? [GPT-2
/// Split]?.
struct PreTokenizerFields {
  const PreTokenizerStep *split = nullptr;
  bool addPrefixSpace = false;
  bool byteLevelUseRegex = false;
};

Result<PreTokenizerFields>
preTokenizerFields(const std::vector<PreTokenizerStep> &steps) {
  PreTokenizerFields out;
  size_t i = 0;
  if (i < steps.size() && steps[i].kind == PreTokenizerStep::Kind::Split) {
    if (steps[i].invert)
      return unsupported("preTokenizer[0]", "an inverted Split step");
    if (steps[i].pattern.empty())
      return unsupported("preTokenizer[0]", "a Split step without a pattern");
    out.split = &steps[i++];
  }
  if (i < steps.size() &&
      steps[i].kind == PreTokenizerStep::Kind::PrefixSpace) {
    out.addPrefixSpace = true;
    ++i;
  }
  if (i < steps.size() && isGpt2Split(steps[i])) {
    out.byteLevelUseRegex = true;
    ++i;
  }
  if (i != steps.size())
    return unsupported(
        "preTokenizer[" + std::to_string(i) + "]",
        "this step (the table holds one Split step, then the ByteLevel "
        "prefix space and GPT-2 split)");
  return out;
}

std::string str(const flatbuffers::String *s) {
  return s ? std::string(s->data(), s->size()) : std::string();
}

} // namespace

Result<Offset<fb::Tokenizer>>
tokenizerToFlatbuffer(FlatBufferBuilder &builder, const TokenizerData &data,
                      const std::string &chatTemplate) {
  KILN_ASSIGN_OR_RETURN(PreTokenizerFields pre,
                        preTokenizerFields(data.preTokenizer));
  if (!data.unkToken.empty())
    return unsupported("unkToken", "an unk token ('" + data.unkToken + "')");
  if (data.ignoreMerges)
    return unsupported("ignoreMerges", "ignore_merges = true");
  if (!(data.chat == ChatTokens()))
    return unsupported("chat", "chat tokens other than the GLM defaults");

  std::vector<std::string> merges;
  merges.reserve(data.merges.size());
  for (size_t i = 0; i < data.merges.size(); ++i) {
    const auto &[left, right] = data.merges[i];
    if (left.empty() || right.empty() || left.find(' ') != std::string::npos ||
        right.find(' ') != std::string::npos)
      return unsupported("merges[" + std::to_string(i) + "]",
                         "a merge with an empty side or a space in a side");
    merges.push_back(left + " " + right);
  }

  std::vector<Offset<fb::AddedToken>> added;
  added.reserve(data.addedTokens.size());
  for (const AddedToken &t : data.addedTokens)
    added.push_back(fb::CreateAddedTokenDirect(builder, t.id, t.content.c_str(),
                                               t.special, t.lstrip, t.rstrip,
                                               t.normalized, t.singleWord));
  auto vocabOffset = builder.CreateVectorOfStrings(data.vocab);
  auto mergesOffset = builder.CreateVectorOfStrings(merges);
  auto addedOffset = builder.CreateVector(added);
  auto pattern = builder.CreateString(pre.split ? pre.split->pattern : "");
  auto behavior =
      builder.CreateString(pre.split ? behaviorName(pre.split->behavior) : "");
  auto templ = builder.CreateString(chatTemplate);
  return fb::CreateTokenizer(builder, vocabOffset, mergesOffset, pattern,
                             behavior, pre.byteLevelUseRegex,
                             pre.addPrefixSpace, addedOffset, templ);
}

Result<TokenizerData> tokenizerFromFlatbuffer(const fb::Tokenizer &table) {
  TokenizerData data;
  if (const auto *vocab = table.vocab()) {
    data.vocab.reserve(vocab->size());
    for (const auto *s : *vocab)
      data.vocab.push_back(str(s));
  }
  if (const auto *merges = table.merges()) {
    data.merges.reserve(merges->size());
    for (uint32_t i = 0; i < merges->size(); ++i) {
      std::string m = str(merges->Get(i));
      size_t space = m.find(' ');
      if (space == std::string::npos || space == 0 || space + 1 == m.size() ||
          m.find(' ', space + 1) != std::string::npos)
        return makeError(StatusCode::InvalidArgument, "tokenizer.merges[", i,
                         "]: '", m,
                         "', expected two non-empty tokens separated by one "
                         "space");
      data.merges.emplace_back(m.substr(0, space), m.substr(space + 1));
    }
  }
  std::string pattern = str(table.pre_tokenizer_pattern());
  std::string behavior = str(table.split_behavior());
  if (!pattern.empty()) {
    PreTokenizerStep step;
    step.pattern = pattern;
    bool known = false;
    for (const auto &b : kBehaviors)
      if (behavior == b.name) {
        step.behavior = b.behavior;
        known = true;
      }
    if (!known)
      return makeError(StatusCode::InvalidArgument,
                       "tokenizer.split_behavior: '", behavior,
                       "', expected Removed, Isolated, MergedWithPrevious, "
                       "MergedWithNext or Contiguous");
    data.preTokenizer.push_back(std::move(step));
  } else if (!behavior.empty()) {
    return makeError(StatusCode::InvalidArgument, "tokenizer.split_behavior: '",
                     behavior, "' given without a pre_tokenizer_pattern");
  }
  if (table.add_prefix_space()) {
    PreTokenizerStep step;
    step.kind = PreTokenizerStep::Kind::PrefixSpace;
    data.preTokenizer.push_back(step);
  }
  if (table.byte_level_use_regex()) {
    PreTokenizerStep step;
    step.pattern = kGpt2SplitPattern;
    step.behavior = SplitBehavior::Isolated;
    data.preTokenizer.push_back(std::move(step));
  }
  if (const auto *added = table.added_tokens()) {
    for (uint32_t i = 0; i < added->size(); ++i) {
      const fb::AddedToken &t = *added->Get(i);
      AddedToken a;
      a.id = t.id();
      a.content = str(t.content());
      a.special = t.special();
      a.lstrip = t.lstrip();
      a.rstrip = t.rstrip();
      a.normalized = t.normalized();
      a.singleWord = t.single_word();
      data.addedTokens.push_back(std::move(a));
    }
  }
  return data;
}

} // namespace kiln::artifact
