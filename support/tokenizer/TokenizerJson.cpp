//===- TokenizerJson.cpp - Hugging Face tokenizer.json reader -------------===//
//
// Accepts the byte-level BPE shape used by GLM (and GPT-2 style tokenizers):
//   normalizer: null
//   pre_tokenizer: Sequence[Split(Regex|String, behavior, invert)...,
//                  ByteLevel] or ByteLevel alone
//   model: BPE (no dropout, no subword prefix/suffix, no byte fallback)
//   decoder: ByteLevel; post_processor: null or ByteLevel
// and rejects anything else with an error naming the field.
//
//===----------------------------------------------------------------------===//

#include "support/tokenizer/ByteLevel.h"
#include "support/tokenizer/TokenizerData.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <map>

namespace kiln {

const char *const kGpt2SplitPattern =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|"
    "\\s+(?!\\S)|\\s+";

const char *splitBehaviorName(SplitBehavior behavior) {
  switch (behavior) {
  case SplitBehavior::Removed:
    return "Removed";
  case SplitBehavior::Isolated:
    return "Isolated";
  case SplitBehavior::MergedWithPrevious:
    return "MergedWithPrevious";
  case SplitBehavior::MergedWithNext:
    return "MergedWithNext";
  case SplitBehavior::Contiguous:
    return "Contiguous";
  }
  return "?";
}

namespace {

using json = nlohmann::json;

constexpr size_t kMaxTokenizerJsonBytes = size_t(1) << 30;

/// A short description of a JSON value for messages: scalars as their JSON
/// text (cut after 80 bytes), arrays and objects by kind and size (and an
/// object's "type"). Never dumps a structured value: a hostile file can nest
/// one deeply, and dump() recurses once per level.
std::string describe(const json &v) {
  if (v.is_object()) {
    auto type = v.find("type");
    if (type != v.end() && type->is_string())
      return "object of type " + describe(*type);
    return "object of " + std::to_string(v.size()) + " members";
  }
  if (v.is_array())
    return "array of " + std::to_string(v.size()) + " elements";
  std::string text = v.dump(-1, ' ', false, json::error_handler_t::replace);
  if (text.size() > 80)
    text = text.substr(0, 80) + "...";
  return std::string(v.type_name()) + " " + text;
}

/// Reads fields of one JSON object; every error names the source and the
/// field path (e.g. "tokenizer.json: model.merges[3]").
class Reader {
public:
  explicit Reader(std::string source) : source_(std::move(source)) {}

  Status error(const std::string &field, const std::string &what) const {
    return makeError(StatusCode::InvalidArgument, source_, ": ", field, ": ",
                     what);
  }

  static std::string typeName(const json &v) { return v.type_name(); }

  /// The member `key` of `obj`, or nullptr if absent.
  static const json *member(const json &obj, const char *key) {
    auto it = obj.find(key);
    return it == obj.end() ? nullptr : &*it;
  }

  Result<bool> optionalBool(const json &obj, const std::string &path,
                            const char *key, bool fallback) const {
    const json *v = member(obj, key);
    if (!v || v->is_null())
      return fallback;
    if (!v->is_boolean())
      return error(path + "." + key,
                   "expected a boolean, found " + typeName(*v));
    return v->get<bool>();
  }

  Result<std::string> requiredString(const json &obj, const std::string &path,
                                     const char *key) const {
    const json *v = member(obj, key);
    if (!v)
      return makeError(StatusCode::NotFound, source_, ": ", path, ".", key,
                       ": missing field");
    if (!v->is_string())
      return error(path + "." + key,
                   "expected a string, found " + typeName(*v));
    return v->get<std::string>();
  }

  Result<int64_t> tokenId(const json &v, const std::string &field) const {
    if (!v.is_number_integer())
      return error(field, "expected an integer token id, found " + describe(v));
    if (v.is_number_unsigned() &&
        v.get<uint64_t>() > static_cast<uint64_t>(kMaxVocabSize))
      return error(field, "token id " + v.dump() +
                              " is out of range, expected 0 <= id < "
                              "kMaxVocabSize (" +
                              std::to_string(kMaxVocabSize) + ")");
    int64_t id = v.get<int64_t>();
    if (id < 0 || id >= kMaxVocabSize)
      return error(field, "token id " + std::to_string(id) +
                              " is out of range, expected 0 <= id < "
                              "kMaxVocabSize (" +
                              std::to_string(kMaxVocabSize) + ")");
    return id;
  }

  const std::string &source() const { return source_; }

private:
  std::string source_;
};

/// Escapes a literal so PCRE2 matches it verbatim.
std::string escapeLiteral(const std::string &literal) {
  std::string out;
  for (char c : literal) {
    unsigned char u = static_cast<unsigned char>(c);
    bool alnum = (u >= '0' && u <= '9') || (u >= 'a' && u <= 'z') ||
                 (u >= 'A' && u <= 'Z') || u >= 0x80;
    if (!alnum)
      out.push_back('\\');
    out.push_back(c);
  }
  return out;
}

Result<SplitBehavior> parseBehavior(const Reader &r, const std::string &field,
                                    const std::string &name) {
  static const std::map<std::string, SplitBehavior> behaviors = {
      {"Removed", SplitBehavior::Removed},
      {"Isolated", SplitBehavior::Isolated},
      {"MergedWithPrevious", SplitBehavior::MergedWithPrevious},
      {"MergedWithNext", SplitBehavior::MergedWithNext},
      {"Contiguous", SplitBehavior::Contiguous}};
  auto it = behaviors.find(name);
  if (it == behaviors.end())
    return r.error(field, "unknown split behavior '" + name +
                              "', expected Removed, Isolated, "
                              "MergedWithPrevious, MergedWithNext or "
                              "Contiguous");
  return it->second;
}

/// Appends `step` unless that would exceed kMaxPreTokenizerSteps.
Status addStep(const Reader &r, const std::string &path, TokenizerData &data,
               PreTokenizerStep step) {
  if (data.preTokenizer.size() >= kMaxPreTokenizerSteps)
    return makeError(StatusCode::ResourceExhausted, r.source(), ": ", path,
                     ": pre-tokenizer steps exceed the limit "
                     "kMaxPreTokenizerSteps (",
                     kMaxPreTokenizerSteps,
                     "): ", data.preTokenizer.size() + 1);
  data.preTokenizer.push_back(std::move(step));
  return Status::ok();
}

/// Appends the steps of one pre-tokenizer (recursing into Sequence, `depth`
/// Sequences deep).
Status parsePreTokenizer(const Reader &r, const json &node,
                         const std::string &path, TokenizerData &data,
                         int &byteLevelCount, int depth = 0) {
  if (!node.is_object())
    return r.error(path, "expected an object, found " + Reader::typeName(node));
  KILN_ASSIGN_OR_RETURN(std::string type, r.requiredString(node, path, "type"));
  if (byteLevelCount > 0)
    return r.error(path, "a '" + type +
                             "' pre-tokenizer after ByteLevel is not "
                             "supported (ByteLevel must come last)");
  if (type == "Sequence") {
    if (depth >= kMaxPreTokenizerDepth)
      return makeError(StatusCode::ResourceExhausted, r.source(), ": ", path,
                       ": Sequence nesting exceeds the limit "
                       "kMaxPreTokenizerDepth (",
                       kMaxPreTokenizerDepth, "): ", depth + 1);
    const json *list = Reader::member(node, "pretokenizers");
    if (!list || !list->is_array())
      return r.error(path + ".pretokenizers", "expected an array");
    for (size_t i = 0; i < list->size(); ++i)
      KILN_RETURN_IF_ERROR(parsePreTokenizer(
          r, (*list)[i], path + ".pretokenizers[" + std::to_string(i) + "]",
          data, byteLevelCount, depth + 1));
    return Status::ok();
  }
  if (type == "Split") {
    PreTokenizerStep step;
    const json *pattern = Reader::member(node, "pattern");
    if (!pattern || !pattern->is_object())
      return r.error(
          path + ".pattern",
          "expected an object {\"Regex\": ...} or {\"String\": ...}");
    if (const json *re = Reader::member(*pattern, "Regex")) {
      if (!re->is_string())
        return r.error(path + ".pattern.Regex", "expected a string");
      step.pattern = re->get<std::string>();
    } else if (const json *lit = Reader::member(*pattern, "String")) {
      if (!lit->is_string())
        return r.error(path + ".pattern.String", "expected a string");
      step.pattern = escapeLiteral(lit->get<std::string>());
    } else {
      return r.error(path + ".pattern",
                     "expected a 'Regex' or 'String' member");
    }
    if (step.pattern.empty())
      return r.error(path + ".pattern", "the pattern is empty");
    KILN_ASSIGN_OR_RETURN(std::string behavior,
                          r.requiredString(node, path, "behavior"));
    KILN_ASSIGN_OR_RETURN(step.behavior,
                          parseBehavior(r, path + ".behavior", behavior));
    KILN_ASSIGN_OR_RETURN(step.invert,
                          r.optionalBool(node, path, "invert", false));
    return addStep(r, path, data, std::move(step));
  }
  if (type == "ByteLevel") {
    // Hugging Face defaults: add_prefix_space and use_regex true.
    KILN_ASSIGN_OR_RETURN(bool prefix,
                          r.optionalBool(node, path, "add_prefix_space", true));
    KILN_ASSIGN_OR_RETURN(bool useRegex,
                          r.optionalBool(node, path, "use_regex", true));
    if (prefix) {
      PreTokenizerStep step;
      step.kind = PreTokenizerStep::Kind::PrefixSpace;
      KILN_RETURN_IF_ERROR(addStep(r, path, data, step));
    }
    if (useRegex) {
      PreTokenizerStep step;
      step.pattern = kGpt2SplitPattern;
      step.behavior = SplitBehavior::Isolated;
      KILN_RETURN_IF_ERROR(addStep(r, path, data, step));
    }
    ++byteLevelCount;
    return Status::ok();
  }
  return r.error(path + ".type",
                 "unsupported pre-tokenizer type '" + type +
                     "', expected Sequence, Split or ByteLevel");
}

Status parseModel(const Reader &r, const json &root, TokenizerData &data,
                  std::map<int64_t, std::string> &vocabById) {
  const json *model = Reader::member(root, "model");
  if (!model || model->is_null())
    return makeError(StatusCode::NotFound, r.source(),
                     ": model: missing field (expected a BPE model)");
  if (!model->is_object())
    return r.error("model",
                   "expected an object, found " + Reader::typeName(*model));
  if (const json *type = Reader::member(*model, "type")) {
    if (!type->is_string() || type->get<std::string>() != "BPE")
      return r.error("model.type", "unsupported model type " + describe(*type) +
                                       ", expected \"BPE\"");
  }
  if (const json *dropout = Reader::member(*model, "dropout")) {
    if (!dropout->is_null() &&
        !(dropout->is_number() && dropout->get<double>() == 0.0))
      return r.error("model.dropout", "BPE dropout " + describe(*dropout) +
                                          " is not supported, expected null");
  }
  for (const char *key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    const json *v = Reader::member(*model, key);
    if (v && !v->is_null() && !(v->is_string() && v->get<std::string>() == ""))
      return r.error(std::string("model.") + key,
                     "unsupported value " + describe(*v) + ", expected null");
  }
  KILN_ASSIGN_OR_RETURN(
      bool byteFallback,
      r.optionalBool(*model, "model", "byte_fallback", false));
  if (byteFallback)
    return r.error("model.byte_fallback",
                   "byte_fallback is not supported for byte-level BPE");
  KILN_ASSIGN_OR_RETURN(
      data.ignoreMerges,
      r.optionalBool(*model, "model", "ignore_merges", false));
  if (const json *unk = Reader::member(*model, "unk_token")) {
    if (unk->is_string())
      data.unkToken = unk->get<std::string>();
    else if (!unk->is_null())
      return r.error("model.unk_token", "expected a string or null, found " +
                                            Reader::typeName(*unk));
  }

  const json *vocab = Reader::member(*model, "vocab");
  if (!vocab)
    return makeError(StatusCode::NotFound, r.source(),
                     ": model.vocab: missing field");
  if (!vocab->is_object())
    return r.error("model.vocab", "expected an object of token -> id, found " +
                                      Reader::typeName(*vocab));
  if (vocab->empty())
    return r.error("model.vocab", "the vocabulary is empty");
  for (auto it = vocab->begin(); it != vocab->end(); ++it) {
    const std::string &token = it.key();
    std::string field = "model.vocab[" + json(token).dump() + "]";
    if (token.empty())
      return r.error(field, "empty token string");
    KILN_ASSIGN_OR_RETURN(int64_t id, r.tokenId(it.value(), field));
    auto [pos, inserted] = vocabById.emplace(id, token);
    if (!inserted)
      return r.error(field, "duplicate id " + std::to_string(id) +
                                ", already used by token " +
                                json(pos->second).dump());
  }

  const json *merges = Reader::member(*model, "merges");
  if (!merges)
    return makeError(StatusCode::NotFound, r.source(),
                     ": model.merges: missing field");
  if (!merges->is_array())
    return r.error("model.merges",
                   "expected an array, found " + Reader::typeName(*merges));
  data.merges.reserve(merges->size());
  for (size_t i = 0; i < merges->size(); ++i) {
    const json &m = (*merges)[i];
    std::string field = "model.merges[" + std::to_string(i) + "]";
    if (m.is_string()) {
      const std::string &s = m.get_ref<const std::string &>();
      size_t space = s.find(' ');
      if (space == std::string::npos || space == 0 || space + 1 == s.size() ||
          s.find(' ', space + 1) != std::string::npos)
        return r.error(field, "expected \"left right\" (two tokens separated "
                              "by one space), found " +
                                  describe(m));
      data.merges.emplace_back(s.substr(0, space), s.substr(space + 1));
    } else if (m.is_array()) {
      if (m.size() != 2 || !m[0].is_string() || !m[1].is_string() ||
          m[0].get_ref<const std::string &>().empty() ||
          m[1].get_ref<const std::string &>().empty())
        return r.error(field, "expected a pair of non-empty strings, found " +
                                  describe(m));
      data.merges.emplace_back(m[0].get<std::string>(),
                               m[1].get<std::string>());
    } else {
      return r.error(field, "expected a string or a pair of strings, found " +
                                Reader::typeName(m));
    }
  }
  return Status::ok();
}

Status parseAddedTokens(const Reader &r, const json &root,
                        TokenizerData &data) {
  const json *list = Reader::member(root, "added_tokens");
  if (!list || list->is_null())
    return Status::ok();
  if (!list->is_array())
    return r.error("added_tokens",
                   "expected an array, found " + Reader::typeName(*list));
  std::map<int64_t, size_t> seenIds;
  std::map<std::string, size_t> seenContent;
  for (size_t i = 0; i < list->size(); ++i) {
    const json &t = (*list)[i];
    std::string path = "added_tokens[" + std::to_string(i) + "]";
    if (!t.is_object())
      return r.error(path, "expected an object, found " + Reader::typeName(t));
    AddedToken token;
    const json *id = Reader::member(t, "id");
    if (!id)
      return makeError(StatusCode::NotFound, r.source(), ": ", path,
                       ".id: missing field");
    KILN_ASSIGN_OR_RETURN(int64_t tokenId, r.tokenId(*id, path + ".id"));
    token.id = static_cast<int32_t>(tokenId);
    KILN_ASSIGN_OR_RETURN(token.content, r.requiredString(t, path, "content"));
    if (token.content.empty())
      return r.error(path + ".content", "empty token content");
    KILN_ASSIGN_OR_RETURN(token.special,
                          r.optionalBool(t, path, "special", false));
    KILN_ASSIGN_OR_RETURN(token.normalized,
                          r.optionalBool(t, path, "normalized", false));
    KILN_ASSIGN_OR_RETURN(token.lstrip,
                          r.optionalBool(t, path, "lstrip", false));
    KILN_ASSIGN_OR_RETURN(token.rstrip,
                          r.optionalBool(t, path, "rstrip", false));
    KILN_ASSIGN_OR_RETURN(token.singleWord,
                          r.optionalBool(t, path, "single_word", false));
    if (auto [it, ok] = seenIds.emplace(tokenId, i); !ok)
      return r.error(path + ".id", "duplicate id " + std::to_string(tokenId) +
                                       ", already used by added_tokens[" +
                                       std::to_string(it->second) + "]");
    if (auto [it, ok] = seenContent.emplace(token.content, i); !ok)
      return r.error(path + ".content", "duplicate content " +
                                            json(token.content).dump() +
                                            ", already used by added_tokens[" +
                                            std::to_string(it->second) + "]");
    data.addedTokens.push_back(std::move(token));
  }
  return Status::ok();
}

Status checkDecoderAndPostProcessor(const Reader &r, const json &root) {
  const json *decoder = Reader::member(root, "decoder");
  if (!decoder || decoder->is_null())
    return r.error("decoder",
                   "missing; a byte-level BPE needs a ByteLevel decoder");
  if (!decoder->is_object())
    return r.error("decoder", "expected an object");
  KILN_ASSIGN_OR_RETURN(std::string type,
                        r.requiredString(*decoder, "decoder", "type"));
  if (type != "ByteLevel")
    return r.error("decoder.type", "unsupported decoder type '" + type +
                                       "', expected ByteLevel");

  const json *post = Reader::member(root, "post_processor");
  if (post && !post->is_null()) {
    if (!post->is_object())
      return r.error("post_processor", "expected an object or null");
    KILN_ASSIGN_OR_RETURN(std::string postType,
                          r.requiredString(*post, "post_processor", "type"));
    if (postType != "ByteLevel")
      return r.error("post_processor.type",
                     "unsupported post-processor type '" + postType +
                         "', expected null or ByteLevel (GLM adds no "
                         "special tokens when encoding)");
  }
  const json *normalizer = Reader::member(root, "normalizer");
  if (normalizer && !normalizer->is_null())
    return r.error("normalizer", "unsupported normalizer " +
                                     describe(*normalizer) + ", expected null");
  return Status::ok();
}

} // namespace

Result<TokenizerData> parseTokenizerJsonText(const std::string &text,
                                             const std::string &sourceName) {
  Reader r(sourceName);
  json root;
  try {
    root = json::parse(text);
  } catch (const json::exception &e) {
    return makeError(StatusCode::InvalidArgument, sourceName,
                     ": not valid JSON: ", e.what());
  }
  if (!root.is_object())
    return r.error("(root)",
                   "expected a JSON object, found " + Reader::typeName(root));

  TokenizerData data;
  std::map<int64_t, std::string> vocabById;
  KILN_RETURN_IF_ERROR(parseModel(r, root, data, vocabById));
  KILN_RETURN_IF_ERROR(parseAddedTokens(r, root, data));
  KILN_RETURN_IF_ERROR(checkDecoderAndPostProcessor(r, root));

  const json *pre = Reader::member(root, "pre_tokenizer");
  if (!pre || pre->is_null())
    return r.error("pre_tokenizer",
                   "missing; a byte-level BPE needs a ByteLevel pre-tokenizer");
  int byteLevelCount = 0;
  KILN_RETURN_IF_ERROR(
      parsePreTokenizer(r, *pre, "pre_tokenizer", data, byteLevelCount));
  if (byteLevelCount == 0)
    return r.error("pre_tokenizer",
                   "no ByteLevel pre-tokenizer; only byte-level BPE is "
                   "supported");

  // Lay the vocabulary out by id; ids of added tokens extend it. Every id up
  // to the largest costs a slot here and in Tokenizer::create, so only
  // kMaxUnassignedIds of them may be unused: a few bytes naming one large
  // id must not cost a gigabyte.
  int64_t maxId = vocabById.rbegin()->first;
  int64_t assigned = static_cast<int64_t>(vocabById.size());
  for (const AddedToken &t : data.addedTokens) {
    maxId = std::max<int64_t>(maxId, t.id);
    assigned += vocabById.count(t.id) ? 0 : 1;
  }
  if (maxId + 1 - assigned > kMaxUnassignedIds)
    return makeError(StatusCode::ResourceExhausted, sourceName,
                     ": token ids reach ", maxId, " but only ", assigned,
                     " are assigned: ", maxId + 1 - assigned,
                     " unassigned ids exceed the limit kMaxUnassignedIds (",
                     kMaxUnassignedIds, ")");
  data.vocab.assign(static_cast<size_t>(maxId) + 1, std::string());
  for (auto &[id, token] : vocabById)
    data.vocab[static_cast<size_t>(id)] = std::move(token);
  for (size_t i = 0; i < data.addedTokens.size(); ++i) {
    const AddedToken &t = data.addedTokens[i];
    const std::string &existing = data.vocab[static_cast<size_t>(t.id)];
    if (existing.empty())
      continue;
    std::string byteLevel;
    appendByteLevel(t.content, byteLevel);
    if (existing != t.content && existing != byteLevel)
      return r.error("added_tokens[" + std::to_string(i) + "].id",
                     "duplicate id " + std::to_string(t.id) + ": " +
                         json(t.content).dump() +
                         " collides with vocabulary token " +
                         json(existing).dump());
  }
  return data;
}

Result<TokenizerData> parseTokenizerJson(const std::string &path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in)
    return makeError(StatusCode::NotFound, path, ": cannot open file");
  std::streamoff size = in.tellg();
  if (size < 0)
    return makeError(StatusCode::DataLoss, path, ": cannot determine size");
  if (static_cast<uint64_t>(size) > kMaxTokenizerJsonBytes)
    return makeError(StatusCode::ResourceExhausted, path, ": file of ", size,
                     " bytes exceeds the limit of ", kMaxTokenizerJsonBytes,
                     " bytes for tokenizer.json");
  std::string text(static_cast<size_t>(size), '\0');
  in.seekg(0);
  if (size > 0 && !in.read(text.data(), size))
    return makeError(StatusCode::DataLoss, path, ": short read, expected ",
                     size, " bytes");
  return parseTokenizerJsonText(text, path);
}

} // namespace kiln
