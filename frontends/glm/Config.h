//===- Config.h - GLM config.json -------------------------------*- C++ -*-===//
//
// Reads a Hugging Face config.json for the two GLM families (GLM.md 2):
//  * `glm_moe_dsa`: GLM-5 / 5.1 / 5.2 (MLA + DSA indexer, IndexShare);
//  * `glm4_moe`: GLM-4.5 / 4.6 / 4.7 / 4.5-Air (GQA).
// Every field the graph builder needs is resolved here, with defaults only
// where published configs legitimately omit a field (listed per field below).
// Required: model_type, hidden_size, vocab_size, num_hidden_layers,
// max_position_embeddings, first_k_dense_replace, intermediate_size,
// moe_intermediate_size, n_routed_experts, num_experts_per_tok,
// num_attention_heads, a RoPE theta, and for glm_moe_dsa q_lora_rank,
// kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim, index_topk,
// index_n_heads, index_head_dim. A field present as null counts as absent.
// Values are checked for consistency; errors name the file and the field.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_FRONTENDS_GLM_CONFIG_H
#define KILN_FRONTENDS_GLM_CONFIG_H

#include "frontends/glm/QuantConfig.h"
#include "support/Status.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::glm {

/// Bounds on config values, so shape arithmetic never overflows int64.
inline constexpr int64_t kMaxConfigDim = int64_t(1) << 24;
inline constexpr int64_t kMaxConfigLayers = 4096;
inline constexpr int64_t kMaxNextnLayers = 16;
inline constexpr uint64_t kMaxConfigBytes = 64ull << 20;

enum class ModelType {
  Glm4Moe,   // "glm4_moe"
  GlmMoeDsa, // "glm_moe_dsa"
};

const char *modelTypeName(ModelType type);

/// Per-layer DSA indexer kind (GLM-5.2 IndexShare): a full layer computes its
/// own top-k and ships indexer weights; a shared layer reuses the top-k of
/// the most recent full layer and ships none.
enum class IndexerType { Full, Shared };

struct GlmConfig {
  /// The file (or origin) the config was read from, for messages.
  std::string source = "config.json";
  ModelType modelType = ModelType::GlmMoeDsa;

  // Sizes.
  int64_t hiddenSize = 0;
  int64_t vocabSize = 0;
  int64_t numHiddenLayers = 0;
  int64_t numNextnPredictLayers = 0; // default 0
  int64_t maxPositionEmbeddings = 0;

  // MLP / MoE.
  int64_t firstKDenseReplace = 0;
  int64_t moeLayerFreq = 1; // default 1 (absent on GLM-4.x)
  int64_t intermediateSize = 0;
  int64_t moeIntermediateSize = 0;
  int64_t nRoutedExperts = 0;
  int64_t numExpertsPerTok = 0;
  int64_t nSharedExperts = 1;          // default 1 (as in transformers)
  int64_t nGroup = 1;                  // default 1
  int64_t topkGroup = 1;               // default 1
  double routedScalingFactor = 1.0;    // default 1.0
  bool normTopkProb = true;            // default true
  std::string scoringFunc = "sigmoid"; // only "sigmoid"; default when absent
  std::string topkMethod = "noaux_tc"; // only "noaux_tc"; default when absent
  std::string moeRouterDtype;          // informational, e.g. "float32"

  // Attention, both families.
  int64_t numAttentionHeads = 0;
  int64_t numKeyValueHeads = 0; // default numAttentionHeads
  /// glm4_moe: per-head size (default hidden / heads). glm_moe_dsa: equals
  /// qkRopeHeadDim (the GLM-5 trap: it only sizes RoPE), filled in when
  /// absent.
  int64_t headDim = 0;
  double rmsNormEps = 1e-5; // default 1e-5
  double ropeTheta = 0;     // rope_parameters.rope_theta or rope_theta
  /// Fraction of headDim that is rotated: glm4_moe default 0.5, glm_moe_dsa
  /// 1.0 (RoPE there covers exactly qk_rope_head_dim).
  double partialRotaryFactor = 1.0;
  bool useQkNorm = false;     // glm4_moe; default false
  bool attentionBias = false; // default false

  // MLA + DSA (glm_moe_dsa only; zero for glm4_moe).
  int64_t qLoraRank = 0;
  int64_t kvLoraRank = 0;
  int64_t qkNopeHeadDim = 0;
  int64_t qkRopeHeadDim = 0;
  int64_t vHeadDim = 0;
  int64_t indexTopk = 0;
  int64_t indexNHeads = 0;
  int64_t indexHeadDim = 0;
  bool ropeInterleave = true;        // default true
  bool indexerRopeInterleave = true; // default true
  /// One per main layer (numHiddenLayers); empty for glm4_moe. Resolved by
  /// GLM.md 2.2: explicit `indexer_types`, else the `index_topk_freq` /
  /// `index_skip_topk_offset` formula, else all full.
  std::vector<IndexerType> indexerTypes;

  // Tokens.
  std::vector<int64_t> eosTokenIds; // int or list in the file; may be empty
  std::optional<int64_t> padTokenId;
  bool tieWordEmbeddings = false;

  QuantConfig quant;

  // Derived helpers.
  bool isDsa() const { return modelType == ModelType::GlmMoeDsa; }
  /// qk_nope_head_dim + qk_rope_head_dim (MLA), or headDim (GQA).
  int64_t qkHeadDim() const;
  /// Rotated dims per head: qk_rope_head_dim (MLA) or
  /// headDim * partial_rotary_factor (GQA).
  int64_t ropeDim() const;
  /// True for a main layer with a routed MoE MLP (the MTP layers always are).
  bool isMoeLayer(int64_t layer) const;
  /// True for an MTP layer index (numHiddenLayers .. + numNextnPredictLayers).
  bool isMtpLayer(int64_t layer) const;
  /// Indexer kind of `layer`; MTP layers are Full (they compute their own
  /// top-k, GLM.md 5.1).
  IndexerType indexerType(int64_t layer) const;
  int64_t numFullIndexerLayers() const;
};

/// Parses config.json text. `origin` names the file in messages.
Result<GlmConfig> parseConfigJson(std::string_view text,
                                  const std::string &origin = "config.json");
/// Reads and parses a config.json file, or `<dir>/config.json` for a
/// directory.
Result<GlmConfig> parseConfigFile(const std::string &path);

/// The IndexShare rule on its own: layer i is full iff
/// max(i - offset + 1, 0) % freq == 0.
std::vector<IndexerType> indexShareSchedule(int64_t numLayers, int64_t freq,
                                            int64_t offset);

} // namespace kiln::glm

#endif // KILN_FRONTENDS_GLM_CONFIG_H
