//===- Config.cpp - GLM config.json ---------------------------------------===//

#include "frontends/glm/Config.h"

#include "frontends/glm/JsonFields.h"
#include "support/abi/MoeRules.h"

#include <cmath>
#include <filesystem>
#include <fstream>

namespace kiln::glm {

using nlohmann::json;

const char *modelTypeName(ModelType type) {
  return type == ModelType::Glm4Moe ? "glm4_moe" : "glm_moe_dsa";
}

int64_t GlmConfig::qkHeadDim() const {
  return isDsa() ? qkNopeHeadDim + qkRopeHeadDim : headDim;
}

int64_t GlmConfig::ropeDim() const {
  if (isDsa())
    return qkRopeHeadDim;
  return static_cast<int64_t>(
      std::llround(static_cast<double>(headDim) * partialRotaryFactor));
}

bool GlmConfig::isMtpLayer(int64_t layer) const {
  return layer >= numHiddenLayers &&
         layer < numHiddenLayers + numNextnPredictLayers;
}

bool GlmConfig::isMoeLayer(int64_t layer) const {
  if (isMtpLayer(layer))
    return true;
  return layer >= firstKDenseReplace && layer < numHiddenLayers &&
         layer % moeLayerFreq == 0;
}

IndexerType GlmConfig::indexerType(int64_t layer) const {
  if (layer >= 0 && layer < static_cast<int64_t>(indexerTypes.size()))
    return indexerTypes[layer];
  return IndexerType::Full;
}

int64_t GlmConfig::numFullIndexerLayers() const {
  int64_t n = 0;
  for (IndexerType t : indexerTypes)
    n += t == IndexerType::Full;
  return n;
}

std::vector<IndexerType> indexShareSchedule(int64_t numLayers, int64_t freq,
                                            int64_t offset) {
  std::vector<IndexerType> types;
  if (freq <= 0 || numLayers <= 0)
    return types;
  for (int64_t i = 0; i < numLayers; ++i) {
    int64_t k = i - offset + 1;
    types.push_back((k > 0 ? k : 0) % freq == 0 ? IndexerType::Full
                                                : IndexerType::Shared);
  }
  return types;
}

namespace {

// Reads the fields of one config object into a GlmConfig.
class ConfigParser {
public:
  ConfigParser(const json &root, const std::string &origin)
      : root_(root), f_(root, origin) {}

  Result<GlmConfig> parse();

private:
  // An integer in [minValue, maxValue]; `fallback` used when absent unless
  // the field is required.
  Result<int64_t> dim(const char *field, std::optional<int64_t> fallback,
                      int64_t minValue = 1,
                      int64_t maxValue = kMaxConfigDim) const;
  Status parseCommon();
  Status parseRope();
  Status parseGlm4();
  Status parseDsa();
  Status parseIndexerTypes();
  Status parseTokens();
  Status checkMoe() const;

  const json &root_;
  JsonFields f_;
  GlmConfig c_;
};

Result<int64_t> ConfigParser::dim(const char *field,
                                  std::optional<int64_t> fallback,
                                  int64_t minValue, int64_t maxValue) const {
  int64_t value;
  if (fallback) {
    KILN_ASSIGN_OR_RETURN(value, f_.optionalInt(field, *fallback));
  } else {
    KILN_ASSIGN_OR_RETURN(value, f_.requireInt(field));
  }
  if (value < minValue || value > maxValue)
    return f_.error(field, "expected an integer in [", minValue, ", ", maxValue,
                    "], found ", value);
  return value;
}

Status ConfigParser::parseCommon() {
  const auto none = std::nullopt;
  KILN_ASSIGN_OR_RETURN(c_.hiddenSize, dim("hidden_size", none));
  KILN_ASSIGN_OR_RETURN(c_.vocabSize, dim("vocab_size", none));
  KILN_ASSIGN_OR_RETURN(c_.numHiddenLayers,
                        dim("num_hidden_layers", none, 1, kMaxConfigLayers));
  KILN_ASSIGN_OR_RETURN(c_.numNextnPredictLayers,
                        dim("num_nextn_predict_layers", 0, 0, kMaxNextnLayers));
  KILN_ASSIGN_OR_RETURN(
      c_.maxPositionEmbeddings,
      dim("max_position_embeddings", none, 1, int64_t(1) << 40));
  KILN_ASSIGN_OR_RETURN(
      c_.firstKDenseReplace,
      dim("first_k_dense_replace", none, 0, c_.numHiddenLayers));
  KILN_ASSIGN_OR_RETURN(c_.moeLayerFreq,
                        dim("moe_layer_freq", 1, 1, kMaxConfigLayers));
  KILN_ASSIGN_OR_RETURN(c_.intermediateSize, dim("intermediate_size", none));
  KILN_ASSIGN_OR_RETURN(c_.moeIntermediateSize,
                        dim("moe_intermediate_size", none));
  KILN_ASSIGN_OR_RETURN(c_.nRoutedExperts, dim("n_routed_experts", none));
  KILN_ASSIGN_OR_RETURN(c_.numExpertsPerTok, dim("num_experts_per_tok", none));
  KILN_ASSIGN_OR_RETURN(c_.nSharedExperts, dim("n_shared_experts", 1, 0));
  KILN_ASSIGN_OR_RETURN(c_.nGroup, dim("n_group", 1));
  KILN_ASSIGN_OR_RETURN(c_.topkGroup, dim("topk_group", 1));
  KILN_ASSIGN_OR_RETURN(c_.routedScalingFactor,
                        f_.optionalNumber("routed_scaling_factor", 1.0));
  if (!(c_.routedScalingFactor > 0) || !std::isfinite(c_.routedScalingFactor))
    return f_.error("routed_scaling_factor",
                    "expected a positive number, "
                    "found ",
                    c_.routedScalingFactor);
  KILN_ASSIGN_OR_RETURN(c_.normTopkProb,
                        f_.optionalBool("norm_topk_prob", true));
  KILN_ASSIGN_OR_RETURN(c_.scoringFunc,
                        f_.optionalString("scoring_func", "sigmoid"));
  if (c_.scoringFunc != "sigmoid")
    return f_.error("scoring_func", "expected \"sigmoid\", found \"",
                    c_.scoringFunc, "\" (unsupported)");
  KILN_ASSIGN_OR_RETURN(c_.topkMethod,
                        f_.optionalString("topk_method", "noaux_tc"));
  if (c_.topkMethod != "noaux_tc")
    return f_.error("topk_method", "expected \"noaux_tc\", found \"",
                    c_.topkMethod, "\" (unsupported)");
  KILN_ASSIGN_OR_RETURN(c_.moeRouterDtype,
                        f_.optionalString("moe_router_dtype", ""));
  KILN_ASSIGN_OR_RETURN(std::string act,
                        f_.optionalString("hidden_act", "silu"));
  if (act != "silu")
    return f_.error("hidden_act", "expected \"silu\", found \"", act,
                    "\" (unsupported)");

  KILN_ASSIGN_OR_RETURN(c_.numAttentionHeads, dim("num_attention_heads", none));
  KILN_ASSIGN_OR_RETURN(c_.numKeyValueHeads,
                        dim("num_key_value_heads", c_.numAttentionHeads));
  KILN_ASSIGN_OR_RETURN(c_.rmsNormEps, f_.optionalNumber("rms_norm_eps", 1e-5));
  if (!(c_.rmsNormEps > 0) || !std::isfinite(c_.rmsNormEps))
    return f_.error("rms_norm_eps", "expected a positive number, found ",
                    c_.rmsNormEps);
  KILN_ASSIGN_OR_RETURN(c_.attentionBias,
                        f_.optionalBool("attention_bias", false));
  KILN_ASSIGN_OR_RETURN(c_.tieWordEmbeddings,
                        f_.optionalBool("tie_word_embeddings", false));
  return Status::ok();
}

Status ConfigParser::parseRope() {
  std::optional<double> theta;
  if (const json *params = f_.find("rope_parameters")) {
    if (!params->is_object())
      return f_.error("rope_parameters", "expected an object, found ",
                      describeJson(*params));
    JsonFields p(*params, f_.origin(), "rope_parameters.");
    KILN_ASSIGN_OR_RETURN(std::string type,
                          p.optionalString("rope_type", "default"));
    if (type != "default")
      return p.error("rope_type", "expected \"default\", found \"", type,
                     "\" (RoPE scaling is unsupported)");
    if (p.has("rope_theta")) {
      KILN_ASSIGN_OR_RETURN(theta, p.requireNumber("rope_theta"));
    }
    if (p.has("partial_rotary_factor")) {
      KILN_ASSIGN_OR_RETURN(c_.partialRotaryFactor,
                            p.requireNumber("partial_rotary_factor"));
    }
  }
  if (const json *scaling = f_.find("rope_scaling")) {
    std::string type = "?";
    if (scaling->is_object()) {
      for (const char *key : {"rope_type", "type"})
        if (scaling->contains(key) && (*scaling)[key].is_string())
          type = (*scaling)[key].get<std::string>();
    }
    if (type != "default")
      return f_.error("rope_scaling",
                      "expected null or a \"default\" "
                      "rope_type, found ",
                      type == "?" ? describeJson(*scaling)
                                  : "rope_type \"" + type + "\"",
                      " (RoPE scaling is unsupported)");
  }
  if (f_.has("rope_theta")) {
    KILN_ASSIGN_OR_RETURN(double legacy, f_.requireNumber("rope_theta"));
    if (theta && *theta != legacy)
      return f_.error("rope_theta", legacy,
                      " disagrees with rope_parameters.rope_theta ", *theta);
    theta = legacy;
  }
  if (!theta)
    return makeError(StatusCode::NotFound, f_.origin(),
                     ": field 'rope_parameters.rope_theta' (or legacy "
                     "'rope_theta') is missing");
  if (!(*theta > 0) || !std::isfinite(*theta))
    return f_.error("rope_theta", "expected a positive number, found ", *theta);
  c_.ropeTheta = *theta;
  return Status::ok();
}

Status ConfigParser::parseGlm4() {
  KILN_ASSIGN_OR_RETURN(auto headDim, f_.maybeInt("head_dim"));
  if (headDim) {
    KILN_ASSIGN_OR_RETURN(c_.headDim, dim("head_dim", std::nullopt));
  } else {
    if (c_.hiddenSize % c_.numAttentionHeads != 0)
      return f_.error("hidden_size", c_.hiddenSize,
                      " is not divisible by num_attention_heads ",
                      c_.numAttentionHeads, " and head_dim is absent");
    c_.headDim = c_.hiddenSize / c_.numAttentionHeads;
  }
  if (!root_.contains("rope_parameters") ||
      !root_["rope_parameters"].contains("partial_rotary_factor")) {
    KILN_ASSIGN_OR_RETURN(c_.partialRotaryFactor,
                          f_.optionalNumber("partial_rotary_factor", 0.5));
  }
  double rotated = static_cast<double>(c_.headDim) * c_.partialRotaryFactor;
  if (!(c_.partialRotaryFactor > 0 && c_.partialRotaryFactor <= 1) ||
      rotated != std::floor(rotated) || static_cast<int64_t>(rotated) % 2 != 0)
    return f_.error("partial_rotary_factor",
                    "expected a factor in (0, 1] "
                    "that rotates an even number of "
                    "the ",
                    c_.headDim, " head dims, found ", c_.partialRotaryFactor);
  KILN_ASSIGN_OR_RETURN(c_.useQkNorm, f_.optionalBool("use_qk_norm", false));
  return Status::ok();
}

Status ConfigParser::parseDsa() {
  const auto none = std::nullopt;
  KILN_ASSIGN_OR_RETURN(c_.qLoraRank, dim("q_lora_rank", none));
  KILN_ASSIGN_OR_RETURN(c_.kvLoraRank, dim("kv_lora_rank", none));
  KILN_ASSIGN_OR_RETURN(c_.qkNopeHeadDim, dim("qk_nope_head_dim", none));
  KILN_ASSIGN_OR_RETURN(c_.qkRopeHeadDim, dim("qk_rope_head_dim", none));
  KILN_ASSIGN_OR_RETURN(c_.vHeadDim, dim("v_head_dim", none));
  KILN_ASSIGN_OR_RETURN(c_.indexTopk, dim("index_topk", none));
  KILN_ASSIGN_OR_RETURN(c_.indexNHeads, dim("index_n_heads", none));
  KILN_ASSIGN_OR_RETURN(c_.indexHeadDim, dim("index_head_dim", none));
  KILN_ASSIGN_OR_RETURN(c_.ropeInterleave,
                        f_.optionalBool("rope_interleave", true));
  KILN_ASSIGN_OR_RETURN(c_.indexerRopeInterleave,
                        f_.optionalBool("indexer_rope_interleave", true));
  if (c_.qkRopeHeadDim % 2 != 0)
    return f_.error("qk_rope_head_dim", "expected an even number, found ",
                    c_.qkRopeHeadDim);
  KILN_ASSIGN_OR_RETURN(auto qkHeadDim, f_.maybeInt("qk_head_dim"));
  if (qkHeadDim && *qkHeadDim != c_.qkNopeHeadDim + c_.qkRopeHeadDim)
    return f_.error("qk_head_dim",
                    "expected qk_nope_head_dim + "
                    "qk_rope_head_dim = ",
                    c_.qkNopeHeadDim, " + ", c_.qkRopeHeadDim, " = ",
                    c_.qkNopeHeadDim + c_.qkRopeHeadDim, ", found ",
                    *qkHeadDim);
  // GLM-5 trap: head_dim only sizes RoPE and equals qk_rope_head_dim.
  KILN_ASSIGN_OR_RETURN(auto headDim, f_.maybeInt("head_dim"));
  if (headDim && *headDim != c_.qkRopeHeadDim)
    return f_.error("head_dim", "expected qk_rope_head_dim (", c_.qkRopeHeadDim,
                    ") for glm_moe_dsa, found ", *headDim);
  c_.headDim = c_.qkRopeHeadDim;
  c_.partialRotaryFactor = 1.0;
  if (c_.indexHeadDim < c_.qkRopeHeadDim)
    return f_.error("index_head_dim", "expected at least qk_rope_head_dim (",
                    c_.qkRopeHeadDim, "), found ", c_.indexHeadDim);
  if (c_.attentionBias)
    return f_.error("attention_bias",
                    "expected false for glm_moe_dsa (MLA has no biases)");
  return parseIndexerTypes();
}

Status ConfigParser::parseIndexerTypes() {
  int64_t layers = c_.numHiddenLayers;
  if (const json *types = f_.find("indexer_types")) {
    if (!types->is_array())
      return f_.error("indexer_types",
                      "expected a list of \"full\"/"
                      "\"shared\", found ",
                      describeJson(*types));
    if (static_cast<int64_t>(types->size()) != layers)
      return f_.error("indexer_types",
                      "expected one entry per layer "
                      "(num_hidden_layers = ",
                      layers, "), found ", types->size());
    for (size_t i = 0; i < types->size(); ++i) {
      const json &t = (*types)[i];
      if (t == "full")
        c_.indexerTypes.push_back(IndexerType::Full);
      else if (t == "shared")
        c_.indexerTypes.push_back(IndexerType::Shared);
      else
        return f_.error("indexer_types", "element ", i,
                        " expected \"full\" or \"shared\", found ",
                        describeJson(t));
    }
  } else if (f_.has("index_topk_freq")) {
    if (f_.has("index_topk_pattern"))
      return f_.error("index_topk_pattern",
                      "is not supported (expected null); give indexer_types "
                      "explicitly");
    KILN_ASSIGN_OR_RETURN(int64_t freq, dim("index_topk_freq", std::nullopt, 1,
                                            kMaxConfigLayers));
    KILN_ASSIGN_OR_RETURN(
        int64_t offset,
        dim("index_skip_topk_offset", std::nullopt, 0, kMaxConfigLayers));
    c_.indexerTypes = indexShareSchedule(layers, freq, offset);
  } else {
    c_.indexerTypes.assign(layers, IndexerType::Full);
  }
  if (!c_.indexerTypes.empty() && c_.indexerTypes[0] != IndexerType::Full)
    return f_.error("indexer_types", "layer 0 is \"shared\" but a shared "
                                     "layer needs an earlier full layer");
  return Status::ok();
}

Status ConfigParser::parseTokens() {
  auto checkId = [&](const char *field, const json &value) -> Result<int64_t> {
    if (!value.is_number_integer() || value.get<int64_t>() < 0 ||
        value.get<int64_t>() >= c_.vocabSize)
      return f_.error(field,
                      "expected a token id in [0, vocab_size = ", c_.vocabSize,
                      "), found ", describeJson(value));
    return value.get<int64_t>();
  };
  if (const json *eos = f_.find("eos_token_id")) {
    if (eos->is_array()) {
      for (const json &id : *eos) {
        KILN_ASSIGN_OR_RETURN(int64_t v, checkId("eos_token_id", id));
        c_.eosTokenIds.push_back(v);
      }
    } else {
      KILN_ASSIGN_OR_RETURN(int64_t v, checkId("eos_token_id", *eos));
      c_.eosTokenIds.push_back(v);
    }
  }
  if (const json *pad = f_.find("pad_token_id")) {
    KILN_ASSIGN_OR_RETURN(int64_t v, checkId("pad_token_id", *pad));
    c_.padTokenId = v;
  }
  return Status::ok();
}

Status ConfigParser::checkMoe() const {
  // The router's rule (support/abi/MoeRules.h), named by config.json keys.
  abi::MoeRouting routing{c_.nRoutedExperts, c_.numExpertsPerTok, c_.nGroup,
                          c_.topkGroup};
  if (abi::MoeRuleError rule = abi::checkMoeRouting(routing))
    return f_.error(rule.field == "top_k" ? "num_experts_per_tok"
                                          : rule.field.c_str(),
                    rule.field, " ", rule.message);
  if (c_.numAttentionHeads % c_.numKeyValueHeads != 0)
    return f_.error("num_key_value_heads", c_.numKeyValueHeads,
                    " does not divide num_attention_heads ",
                    c_.numAttentionHeads);
  return Status::ok();
}

Result<GlmConfig> ConfigParser::parse() {
  if (!root_.is_object())
    return makeError(StatusCode::InvalidArgument, f_.origin(),
                     ": expected a JSON object, found ", describeJson(root_));
  c_.source = f_.origin();
  KILN_ASSIGN_OR_RETURN(std::string type, f_.optionalString("model_type", ""));
  if (type == "glm_moe_dsa")
    c_.modelType = ModelType::GlmMoeDsa;
  else if (type == "glm4_moe")
    c_.modelType = ModelType::Glm4Moe;
  else
    return f_.error("model_type",
                    "expected \"glm_moe_dsa\" (GLM-5.x) or "
                    "\"glm4_moe\" (GLM-4.x), found ",
                    type.empty() ? std::string("nothing") : '"' + type + '"');
  KILN_RETURN_IF_ERROR(parseCommon());
  KILN_RETURN_IF_ERROR(parseRope());
  KILN_RETURN_IF_ERROR(c_.isDsa() ? parseDsa() : parseGlm4());
  KILN_RETURN_IF_ERROR(parseTokens());
  KILN_RETURN_IF_ERROR(checkMoe());
  static const json kNull;
  auto quant = root_.find("quantization_config");
  KILN_ASSIGN_OR_RETURN(
      c_.quant,
      parseQuantConfig(quant == root_.end() ? kNull : *quant, f_.origin()));
  return std::move(c_);
}

} // namespace

Result<GlmConfig> parseConfigJson(std::string_view text,
                                  const std::string &origin) {
  if (text.size() > kMaxConfigBytes)
    return makeError(StatusCode::ResourceExhausted, origin,
                     ": config exceeds kMaxConfigBytes (", kMaxConfigBytes,
                     "): ", text.size());
  json root;
  try {
    root = json::parse(text.begin(), text.end());
  } catch (const json::exception &e) {
    return makeError(StatusCode::InvalidArgument, origin,
                     ": not valid JSON: ", e.what());
  }
  return ConfigParser(root, origin).parse();
}

Result<GlmConfig> parseConfigFile(const std::string &path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::string file = path;
  if (fs::is_directory(path, ec))
    file = (fs::path(path) / "config.json").string();
  uint64_t size = fs::file_size(file, ec);
  if (ec)
    return makeError(StatusCode::NotFound, file,
                     ": cannot read: ", ec.message());
  if (size > kMaxConfigBytes)
    return makeError(StatusCode::ResourceExhausted, file,
                     ": config exceeds kMaxConfigBytes (", kMaxConfigBytes,
                     "): ", size);
  std::ifstream in(file, std::ios::binary);
  std::string text(size, '\0');
  if (!in.read(text.data(), static_cast<std::streamsize>(size)))
    return makeError(StatusCode::DataLoss, file, ": short read");
  return parseConfigJson(text, file);
}

} // namespace kiln::glm
