//===- fuzz_config.cpp - parseConfigJson on arbitrary text ----------------===//
//
// The input is a config.json. An accepted config must satisfy the bounds
// Config.h promises (so the graph builder's shape arithmetic cannot
// overflow); its derived helpers and the quantization exclude list (globs
// included) are exercised on every layer and a few module names.
//
//===----------------------------------------------------------------------===//

#include "frontends/glm/Config.h"
#include "fuzz/FuzzUtil.h"

using namespace kiln;
using namespace kiln::glm;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string_view text(reinterpret_cast<const char *>(data), size);
  Result<GlmConfig> parsed = parseConfigJson(text, "fuzz/config.json");
  if (!parsed.isOk())
    return 0;
  const GlmConfig &c = *parsed;
  for (int64_t v : {c.hiddenSize, c.vocabSize, c.intermediateSize,
                    c.moeIntermediateSize, c.nRoutedExperts, c.numExpertsPerTok,
                    c.numAttentionHeads, c.numKeyValueHeads, c.headDim})
    KILN_FUZZ_CHECK(v >= 1 && v <= kMaxConfigDim, "dim %lld out of bounds",
                    static_cast<long long>(v));
  KILN_FUZZ_CHECK(c.numHiddenLayers >= 1 &&
                      c.numHiddenLayers <= kMaxConfigLayers,
                  "layers");
  KILN_FUZZ_CHECK(c.numNextnPredictLayers >= 0 &&
                      c.numNextnPredictLayers <= kMaxNextnLayers,
                  "nextn layers");
  KILN_FUZZ_CHECK(c.numExpertsPerTok <= c.nRoutedExperts, "top-k");
  KILN_FUZZ_CHECK(c.numAttentionHeads % c.numKeyValueHeads == 0, "GQA");
  if (c.isDsa())
    KILN_FUZZ_CHECK(static_cast<int64_t>(c.indexerTypes.size()) ==
                        c.numHiddenLayers,
                    "indexer_types size");
  for (int64_t id : c.eosTokenIds)
    KILN_FUZZ_CHECK(id >= 0 && id < c.vocabSize, "eos id");
  (void)c.qkHeadDim();
  int64_t rope = c.ropeDim();
  KILN_FUZZ_CHECK(rope >= 0 && rope <= c.qkHeadDim(), "ropeDim");
  int64_t layers = c.numHiddenLayers + c.numNextnPredictLayers;
  int64_t moe = 0;
  for (int64_t layer = -1; layer <= layers; ++layer) {
    moe += c.isMoeLayer(layer);
    (void)c.isMtpLayer(layer);
    (void)c.indexerType(layer);
  }
  (void)moe;
  KILN_FUZZ_CHECK(c.numFullIndexerLayers() <= c.numHiddenLayers, "full");
  for (const char *module :
       {"model.layers.0.mlp.gate_proj", "model.layers.3.mlp.experts.5.up_proj",
        "model.layers.1.self_attn.indexer.weights_proj", "lm_head",
        "model.layers.2.mlp.shared_experts.down_proj", "", "."})
    (void)c.quant.isExcluded(module);
  return 0;
}
