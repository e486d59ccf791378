//===- ConfigTest.cpp - config.json parsing -------------------------------===//

#include "frontends/glm/Config.h"

#include "../Fixtures.h"
#include "TestUtil.h"

#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

#include <fstream>
#include <functional>

namespace kiln::glm {
namespace {

using nlohmann::json;

GlmConfig parseFixture(const std::string &relPath) {
  auto config = parseConfigFile(kilnFixture(relPath));
  EXPECT_TRUE(config.isOk()) << relPath << ": " << config.status().toString();
  return config.isOk() ? std::move(config).value() : GlmConfig();
}

json loadJson(const std::string &relPath) {
  std::ifstream in(kilnFixture(relPath));
  return json::parse(in);
}

Result<GlmConfig> parseEdited(json j) {
  return parseConfigJson(j.dump(), "edited/config.json");
}

std::vector<IndexerType> types(const std::string &spec) {
  std::vector<IndexerType> out;
  for (char c : spec)
    out.push_back(c == 'F' ? IndexerType::Full : IndexerType::Shared);
  return out;
}

TEST(Config, Glm5TinyFixture) {
  GlmConfig c = parseFixture("glm5-tiny-dev");
  EXPECT_EQ(c.modelType, ModelType::GlmMoeDsa);
  EXPECT_EQ(c.hiddenSize, 256);
  EXPECT_EQ(c.vocabSize, 2048);
  EXPECT_EQ(c.numHiddenLayers, 4);
  EXPECT_EQ(c.numNextnPredictLayers, 1);
  EXPECT_EQ(c.firstKDenseReplace, 1);
  EXPECT_EQ(c.nRoutedExperts, 16);
  EXPECT_EQ(c.numExpertsPerTok, 4);
  EXPECT_EQ(c.nSharedExperts, 1);
  EXPECT_DOUBLE_EQ(c.routedScalingFactor, 2.5);
  EXPECT_EQ(c.qLoraRank, 128);
  EXPECT_EQ(c.kvLoraRank, 64);
  EXPECT_EQ(c.qkNopeHeadDim, 32);
  EXPECT_EQ(c.qkRopeHeadDim, 16);
  EXPECT_EQ(c.qkHeadDim(), 48);
  EXPECT_EQ(c.headDim, 16);
  EXPECT_EQ(c.ropeDim(), 16);
  EXPECT_EQ(c.vHeadDim, 32);
  EXPECT_EQ(c.indexTopk, 64);
  EXPECT_EQ(c.indexNHeads, 4);
  EXPECT_EQ(c.indexHeadDim, 32);
  EXPECT_DOUBLE_EQ(c.ropeTheta, 10000.0);
  EXPECT_TRUE(c.ropeInterleave);
  EXPECT_TRUE(c.indexerRopeInterleave);
  EXPECT_EQ(c.indexerTypes, types("FFSF"));
  EXPECT_EQ(c.indexerType(4), IndexerType::Full); // the MTP layer
  EXPECT_EQ(c.eosTokenIds, (std::vector<int64_t>{2036, 2043, 2045}));
  EXPECT_EQ(c.padTokenId, 2036);
  EXPECT_EQ(c.moeRouterDtype, "float32");
  EXPECT_FALSE(c.isMoeLayer(0));
  EXPECT_TRUE(c.isMoeLayer(1));
  EXPECT_TRUE(c.isMoeLayer(4));
  EXPECT_TRUE(c.isMtpLayer(4));
  EXPECT_FALSE(c.isMtpLayer(3));
  EXPECT_EQ(c.quant.method, QuantMethod::None);
  // The sharded fixture carries the same config.
  auto sharded = parseConfigFile(
      kilnGeneratedFixture("glm5-tiny-dev-sharded/config.json"));
  ASSERT_TRUE(sharded.isOk()) << sharded.status().toString();
  EXPECT_EQ(sharded->indexerTypes, c.indexerTypes);
}

TEST(Config, QuantizedFixtures) {
  GlmConfig fp8 = parseFixture("glm5-tiny-dev-fp8");
  EXPECT_EQ(fp8.quant.method, QuantMethod::Fp8Block);
  EXPECT_EQ(fp8.quant.fp8BlockOut, 128);
  EXPECT_EQ(fp8.quant.fp8BlockIn, 128);
  EXPECT_EQ(fp8.quant.excluded.size(), 10u);
  EXPECT_TRUE(fp8.quant.isExcluded("model.layers.4.eh_proj"));
  EXPECT_FALSE(fp8.quant.isExcluded("model.layers.0.mlp.gate_proj"));

  for (const char *name :
       {"glm5-tiny-dev-mxfp4", "glm5-tiny-dev-mxfp4-routedonly"}) {
    GlmConfig q = parseFixture(name);
    EXPECT_EQ(q.quant.method, QuantMethod::QuarkMxfp4) << name;
    EXPECT_EQ(q.quant.mxfp4GroupSize, 32);
    EXPECT_EQ(q.quant.quarkPackMethod, "reorder");
    EXPECT_FALSE(q.quant.isExcluded("model.layers.1.mlp.experts.3.up_proj"));
    EXPECT_TRUE(q.quant.isExcluded("model.layers.4.mlp.experts.3.up_proj"));
  }
  EXPECT_FALSE(
      parseFixture("glm5-tiny-dev-mxfp4")
          .quant.isExcluded("model.layers.1.mlp.shared_experts.up_proj"));
  EXPECT_TRUE(
      parseFixture("glm5-tiny-dev-mxfp4-routedonly")
          .quant.isExcluded("model.layers.1.mlp.shared_experts.up_proj"));
}

TEST(Config, Glm45TinyFixture) {
  GlmConfig c = parseFixture("glm45-tiny-random");
  EXPECT_EQ(c.modelType, ModelType::Glm4Moe);
  EXPECT_EQ(c.hiddenSize, 128);
  EXPECT_EQ(c.numAttentionHeads, 8);
  EXPECT_EQ(c.numKeyValueHeads, 2);
  EXPECT_EQ(c.headDim, 32);
  EXPECT_DOUBLE_EQ(c.partialRotaryFactor, 0.5);
  EXPECT_EQ(c.ropeDim(), 16);
  EXPECT_TRUE(c.useQkNorm);
  EXPECT_TRUE(c.attentionBias);
  EXPECT_DOUBLE_EQ(c.ropeTheta, 1e6);
  EXPECT_EQ(c.moeLayerFreq, 1);
  EXPECT_TRUE(c.indexerTypes.empty());
  EXPECT_EQ(c.scoringFunc, "sigmoid");
}

TEST(Config, FullSizeGlm5) {
  GlmConfig c = parseFixture("configs/glm-5.json");
  EXPECT_EQ(c.hiddenSize, 6144);
  EXPECT_EQ(c.numHiddenLayers, 78);
  EXPECT_EQ(c.headDim, 64); // the trap: qk_rope_head_dim, not the head size
  EXPECT_EQ(c.qkHeadDim(), 256);
  EXPECT_DOUBLE_EQ(c.ropeTheta, 1e6);
  EXPECT_EQ(c.numFullIndexerLayers(), 78);
  EXPECT_EQ(c.maxPositionEmbeddings, 202752);
  EXPECT_FALSE(c.isMoeLayer(2));
  EXPECT_TRUE(c.isMoeLayer(3));
}

TEST(Config, FullSizeGlm52IndexShare) {
  GlmConfig c = parseFixture("configs/glm-5.2.json");
  EXPECT_EQ(c.headDim, 64); // absent in the file: filled from qk_rope_head_dim
  EXPECT_DOUBLE_EQ(c.ropeTheta, 8e6);
  EXPECT_EQ(c.maxPositionEmbeddings, 1048576);
  ASSERT_EQ(c.indexerTypes.size(), 78u);
  std::vector<int64_t> full;
  for (int64_t i = 0; i < 78; ++i)
    if (c.indexerTypes[i] == IndexerType::Full)
      full.push_back(i);
  EXPECT_EQ(full.size(), 21u);
  EXPECT_EQ(78 - c.numFullIndexerLayers(), 57);
  std::vector<int64_t> expected = {0, 1, 2};
  for (int64_t i = 6; i <= 74; i += 4)
    expected.push_back(i);
  EXPECT_EQ(full, expected);

  // Without the explicit list the formula gives the same schedule.
  json j = loadJson("configs/glm-5.2.json");
  j.erase("indexer_types");
  auto formula = parseEdited(j);
  ASSERT_TRUE(formula.isOk()) << formula.status().toString();
  EXPECT_EQ(formula->indexerTypes, c.indexerTypes);
  // Without either, every layer is full (GLM-5 / 5.1).
  j.erase("index_topk_freq");
  auto allFull = parseEdited(j);
  ASSERT_TRUE(allFull.isOk());
  EXPECT_EQ(allFull->numFullIndexerLayers(), 78);
}

TEST(Config, IndexShareSchedule) {
  EXPECT_EQ(indexShareSchedule(4, 2, 2), types("FFSF"));
  EXPECT_EQ(indexShareSchedule(8, 4, 3), types("FFFSSSFS"));
  EXPECT_EQ(indexShareSchedule(3, 1, 0), types("FFF"));
}

TEST(Config, ExplicitIndexerTypesWin) {
  json j = loadJson("glm5-tiny-dev/config.json");
  j["indexer_types"] = {"full", "shared", "shared", "shared"};
  auto c = parseEdited(j);
  ASSERT_TRUE(c.isOk()) << c.status().toString();
  EXPECT_EQ(c->indexerTypes, types("FSSS"));
}

TEST(Config, FullSizeGlm45AndAir) {
  GlmConfig c = parseFixture("configs/glm-4.5.json");
  EXPECT_EQ(c.modelType, ModelType::Glm4Moe);
  EXPECT_EQ(c.hiddenSize, 5120);
  EXPECT_EQ(c.headDim, 128); // 5120 / 96 is not whole; head_dim is given
  EXPECT_EQ(c.ropeDim(), 64);
  EXPECT_TRUE(c.useQkNorm);
  EXPECT_EQ(c.topkMethod, "noaux_tc"); // absent from the file: default
  EXPECT_EQ(c.eosTokenIds.size(), 3u);
  GlmConfig air = parseFixture("configs/glm-4.5-air.json");
  EXPECT_FALSE(air.useQkNorm);
  EXPECT_DOUBLE_EQ(air.routedScalingFactor, 1.0);
  EXPECT_EQ(air.firstKDenseReplace, 1);
  EXPECT_EQ(air.nRoutedExperts, 128);
}

TEST(Config, EosMayBeASingleInt) {
  json j = loadJson("glm5-tiny-dev/config.json");
  j["eos_token_id"] = 2036;
  auto c = parseEdited(j);
  ASSERT_TRUE(c.isOk());
  EXPECT_EQ(c->eosTokenIds, (std::vector<int64_t>{2036}));
  j["eos_token_id"] = 5000;
  EXPECT_ERROR_CONTAINS(parseEdited(j), "'eos_token_id'", "vocab_size = 2048",
                        "5000");
}

TEST(Config, RopeParametersOrLegacyTheta) {
  json j = loadJson("glm5-tiny-dev/config.json");
  j.erase("rope_parameters");
  j["rope_theta"] = 5e5;
  j["rope_scaling"] = nullptr;
  auto c = parseEdited(j);
  ASSERT_TRUE(c.isOk()) << c.status().toString();
  EXPECT_DOUBLE_EQ(c->ropeTheta, 5e5);
  j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
  EXPECT_ERROR_CONTAINS(parseEdited(j), "'rope_scaling'", "yarn",
                        "unsupported");
  j.erase("rope_scaling");
  j.erase("rope_theta");
  EXPECT_ERROR_CONTAINS(parseEdited(j), "rope_theta", "missing");
  j["rope_parameters"] = {{"rope_theta", 1e4}, {"rope_type", "yarn"}};
  EXPECT_ERROR_CONTAINS(parseEdited(j), "'rope_parameters.rope_type'",
                        "\"yarn\"");
}

// One rejection per rule: each edit of a good config names its field.
TEST(Config, Rejections) {
  json base = loadJson("glm5-tiny-dev/config.json");
  struct Case {
    const char *what;
    std::function<void(json &)> edit;
    std::vector<const char *> pieces;
  } cases[] = {
      {"unknown model_type",
       [](json &j) { j["model_type"] = "llama"; },
       {"'model_type'", "\"llama\"", "glm_moe_dsa"}},
      {"missing model_type",
       [](json &j) { j.erase("model_type"); },
       {"'model_type'", "found nothing"}},
      {"missing hidden_size",
       [](json &j) { j.erase("hidden_size"); },
       {"'hidden_size'", "missing"}},
      {"string hidden_size",
       [](json &j) { j["hidden_size"] = "256"; },
       {"'hidden_size'", "expected an integer", "string \"256\""}},
      {"float hidden_size",
       [](json &j) { j["hidden_size"] = 256.0; },
       {"'hidden_size'", "expected an integer", "number"}},
      {"zero layers",
       [](json &j) { j["num_hidden_layers"] = 0; },
       {"'num_hidden_layers'", "[1, 4096]", "found 0"}},
      {"bool as int",
       [](json &j) { j["norm_topk_prob"] = 1; },
       {"'norm_topk_prob'", "true or false"}},
      {"top-k > experts",
       [](json &j) { j["num_experts_per_tok"] = 17; },
       {"'num_experts_per_tok'", "top_k must be in [1, 16] (the expert count)",
        "found 17"}},
      {"n_group not dividing",
       [](json &j) { j["n_group"] = 3; },
       {"'n_group'",
        "n_group must be positive and divide the expert count (16), found 3"}},
      {"topk_group > n_group",
       [](json &j) { j["topk_group"] = 2; },
       {"'topk_group'", "topk_group must be in [1, 1] (n_group), found 2"}},
      {"qk_head_dim mismatch",
       [](json &j) { j["qk_head_dim"] = 64; },
       {"'qk_head_dim'", "32 + 16 = 48", "found 64"}},
      {"head_dim trap",
       [](json &j) { j["head_dim"] = 48; },
       {"'head_dim'", "qk_rope_head_dim (16)", "found 48"}},
      {"softmax scoring",
       [](json &j) { j["scoring_func"] = "softmax"; },
       {"'scoring_func'", "\"sigmoid\"", "\"softmax\""}},
      {"greedy top-k",
       [](json &j) { j["topk_method"] = "greedy"; },
       {"'topk_method'", "\"greedy\""}},
      {"gelu",
       [](json &j) { j["hidden_act"] = "gelu"; },
       {"'hidden_act'", "\"gelu\""}},
      {"indexer_types length",
       [](json &j) { j["indexer_types"] = {"full"}; },
       {"'indexer_types'", "num_hidden_layers = 4", "found 1"}},
      {"indexer_types element",
       [](json &j) { j["indexer_types"][1] = "half"; },
       {"'indexer_types'", "element 1", "\"half\""}},
      {"layer 0 shared",
       [](json &j) { j["indexer_types"] = {"shared", "full", "full", "full"}; },
       {"'indexer_types'", "layer 0 is \"shared\""}},
      {"freq without offset",
       [](json &j) {
         j.erase("indexer_types");
         j.erase("index_skip_topk_offset");
       },
       {"'index_skip_topk_offset'", "missing"}},
      {"missing MLA field",
       [](json &j) { j.erase("kv_lora_rank"); },
       {"'kv_lora_rank'", "missing"}},
      {"MLA with bias",
       [](json &j) { j["attention_bias"] = true; },
       {"'attention_bias'", "expected false"}},
      {"odd rope dim",
       [](json &j) {
         j["qk_rope_head_dim"] = 15;
         j.erase("qk_head_dim");
         j.erase("head_dim");
       },
       {"'qk_rope_head_dim'", "even", "15"}},
      {"kv heads not dividing",
       [](json &j) { j["num_key_value_heads"] = 3; },
       {"'num_key_value_heads'", "3 does not divide num_attention_heads 8"}},
      {"unsupported quant method",
       [](json &j) {
         j["quantization_config"] = {{"quant_method", "compressed-tensors"}};
       },
       {"'quantization_config.quant_method'", "compressed-tensors"}},
      {"fp8 without block size",
       [](json &j) { j["quantization_config"] = {{"quant_method", "fp8"}}; },
       {"'quantization_config.weight_block_size'", "missing"}},
      {"fp8 static activations",
       [](json &j) {
         j["quantization_config"] = {{"quant_method", "fp8"},
                                     {"activation_scheme", "static"},
                                     {"weight_block_size", {128, 128}}};
       },
       {"'quantization_config.activation_scheme'", "\"static\""}},
      {"quark int8",
       [](json &j) {
         j["quantization_config"] = {
             {"quant_method", "quark"},
             {"global_quant_config",
              {{"weight", {{"dtype", "int8"}, {"group_size", 32}}}}}};
       },
       {"'quantization_config.global_quant_config.weight.dtype'", "int8"}},
      {"quark group 16",
       [](json &j) {
         j["quantization_config"] = {
             {"quant_method", "quark"},
             {"global_quant_config",
              {{"weight", {{"dtype", "fp4"}, {"group_size", 16}}}}}};
       },
       {"weight.group_size'", "expected 32", "16"}},
      {"exclude not strings",
       [](json &j) {
         j["quantization_config"] = {
             {"quant_method", "quark"},
             {"exclude", {1}},
             {"global_quant_config",
              {{"weight", {{"dtype", "fp4"}, {"group_size", 32}}}}}};
       },
       {"'quantization_config.exclude'", "element 0 must be a string"}},
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(c.what);
    json j = base;
    c.edit(j);
    auto r = parseEdited(j);
    ASSERT_FALSE(r.isOk());
    EXPECT_NE(r.status().message().find("edited/config.json"),
              std::string::npos)
        << r.status().message();
    for (const char *piece : c.pieces)
      EXPECT_NE(r.status().message().find(piece), std::string::npos)
          << "lacks '" << piece << "': " << r.status().message();
  }
}

TEST(Config, Glm4Rejections) {
  json j = loadJson("glm45-tiny-random/config.json");
  j.erase("head_dim");
  j["num_attention_heads"] = 96;
  j["num_key_value_heads"] = 8;
  EXPECT_ERROR_CONTAINS(parseEdited(j), "'hidden_size'",
                        "128 is not divisible by num_attention_heads 96");
  j = loadJson("glm45-tiny-random/config.json");
  j["partial_rotary_factor"] = 0.3;
  EXPECT_ERROR_CONTAINS(parseEdited(j), "'partial_rotary_factor'", "0.3");
}

TEST(Config, RejectsMalformedJsonAndMissingFile) {
  EXPECT_ERROR_CONTAINS(parseConfigJson("{\"model_type\": ", "x.json"),
                        "x.json", "not valid JSON");
  EXPECT_ERROR_CONTAINS(parseConfigJson("[]", "x.json"),
                        "expected a JSON object");
  auto r = parseConfigFile("/nonexistent/kiln");
  EXPECT_ERROR_CONTAINS(r, "/nonexistent/kiln", "cannot read");
}

} // namespace
} // namespace kiln::glm
