//===- ModelLayout.cpp - The tensors a GLM config implies -----------------===//

#include "frontends/glm/ModelLayout.h"

namespace kiln::glm {

std::string layerPrefix(int64_t layer) {
  return "model.layers." + std::to_string(layer) + ".";
}

namespace {

class LayoutBuilder {
public:
  explicit LayoutBuilder(const GlmConfig &c) : c_(c) {}

  ModelLayout build() {
    int64_t h = c_.hiddenSize;
    plain("model.embed_tokens.weight", {c_.vocabSize, h});
    plain("model.norm.weight", {h});
    if (!c_.tieWordEmbeddings)
      linear("lm_head", c_.vocabSize, h);
    int64_t total = c_.numHiddenLayers + c_.numNextnPredictLayers;
    for (int64_t layer = 0; layer < total; ++layer) {
      std::string p = layerPrefix(layer);
      plain(p + "input_layernorm.weight", {h});
      plain(p + "post_attention_layernorm.weight", {h});
      if (c_.isDsa())
        mla(p, layer);
      else
        gqa(p);
      if (c_.isMoeLayer(layer))
        moe(p);
      else
        mlp(p + "mlp.", c_.intermediateSize);
      if (c_.isMtpLayer(layer))
        mtp(p);
    }
    return std::move(layout_);
  }

private:
  void plain(std::string name, std::vector<int64_t> shape,
             bool optional = false) {
    layout_.plains.push_back({std::move(name), std::move(shape), optional});
  }
  void linear(std::string module, int64_t out, int64_t in, bool bias = false,
              bool optional = false) {
    layout_.linears.push_back({std::move(module), out, in, bias, optional});
  }

  void mla(const std::string &p, int64_t layer) {
    int64_t h = c_.hiddenSize, heads = c_.numAttentionHeads;
    std::string a = p + "self_attn.";
    linear(a + "q_a_proj", c_.qLoraRank, h);
    plain(a + "q_a_layernorm.weight", {c_.qLoraRank});
    linear(a + "q_b_proj", heads * c_.qkHeadDim(), c_.qLoraRank);
    linear(a + "kv_a_proj_with_mqa", c_.kvLoraRank + c_.qkRopeHeadDim, h);
    plain(a + "kv_a_layernorm.weight", {c_.kvLoraRank});
    linear(a + "kv_b_proj", heads * (c_.qkNopeHeadDim + c_.vHeadDim),
           c_.kvLoraRank);
    linear(a + "o_proj", h, heads * c_.vHeadDim);
    std::string ix = a + "indexer.";
    if (c_.indexerType(layer) == IndexerType::Shared) {
      layout_.forbiddenPrefixes.push_back(ix);
      return;
    }
    linear(ix + "wq_b", c_.indexNHeads * c_.indexHeadDim, c_.qLoraRank);
    linear(ix + "wk", c_.indexHeadDim, h);
    linear(ix + "weights_proj", c_.indexNHeads, h);
    plain(ix + "k_norm.weight", {c_.indexHeadDim});
    plain(ix + "k_norm.bias", {c_.indexHeadDim});
  }

  void gqa(const std::string &p) {
    int64_t h = c_.hiddenSize, d = c_.headDim;
    std::string a = p + "self_attn.";
    bool bias = c_.attentionBias;
    linear(a + "q_proj", c_.numAttentionHeads * d, h, bias);
    linear(a + "k_proj", c_.numKeyValueHeads * d, h, bias);
    linear(a + "v_proj", c_.numKeyValueHeads * d, h, bias);
    linear(a + "o_proj", h, c_.numAttentionHeads * d); // never a bias
    if (c_.useQkNorm) {
      plain(a + "q_norm.weight", {d});
      plain(a + "k_norm.weight", {d});
    }
  }

  void mlp(const std::string &m, int64_t width) {
    int64_t h = c_.hiddenSize;
    linear(m + "gate_proj", width, h);
    linear(m + "up_proj", width, h);
    linear(m + "down_proj", h, width);
  }

  void moe(const std::string &p) {
    int64_t e = c_.nRoutedExperts;
    plain(p + "mlp.gate.weight", {e, c_.hiddenSize});
    plain(p + "mlp.gate.e_score_correction_bias", {e});
    for (int64_t i = 0; i < e; ++i)
      mlp(p + "mlp.experts." + std::to_string(i) + ".", c_.moeIntermediateSize);
    if (c_.nSharedExperts > 0)
      mlp(p + "mlp.shared_experts.",
          c_.moeIntermediateSize * c_.nSharedExperts);
  }

  void mtp(const std::string &p) {
    int64_t h = c_.hiddenSize;
    plain(p + "enorm.weight", {h});
    plain(p + "hnorm.weight", {h});
    linear(p + "eh_proj", h, 2 * h);
    plain(p + "shared_head.norm.weight", {h});
    // GLM-4.x ships MTP copies of the head and embedding; GLM-5.x does not.
    linear(p + "shared_head.head", c_.vocabSize, h, false, /*optional=*/true);
    plain(p + "embed_tokens.weight", {c_.vocabSize, h}, /*optional=*/true);
  }

  const GlmConfig &c_;
  ModelLayout layout_;
};

} // namespace

ModelLayout buildModelLayout(const GlmConfig &config) {
  return LayoutBuilder(config).build();
}

} // namespace kiln::glm
