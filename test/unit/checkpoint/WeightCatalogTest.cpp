//===- WeightCatalogTest.cpp - Weight encodings from tensors present ------===//

#include "frontends/glm/WeightCatalog.h"

#include "../Fixtures.h"
#include "TestUtil.h"

#include <gtest/gtest.h>

#include <map>

namespace kiln::glm {
namespace {

using testing::TempDir;
using testing::writeFilled;

struct Loaded {
  Checkpoint ckpt;
  GlmConfig config;
};

Loaded loadPath(const std::string &path) {
  auto ckpt = Checkpoint::open(path);
  auto config = parseConfigFile(path);
  EXPECT_TRUE(ckpt.isOk()) << ckpt.status().toString();
  EXPECT_TRUE(config.isOk()) << config.status().toString();
  return {std::move(ckpt).value(), std::move(config).value()};
}

Loaded loadFixture(const std::string &name) {
  return loadPath(kilnFixture(name));
}

// Resolves the whole layout and counts linears per encoding.
std::map<WeightEncoding, int> classify(const Loaded &m,
                                       ResolvedWeights *out = nullptr) {
  WeightCatalog catalog(m.ckpt, m.config);
  auto resolved = catalog.resolve(buildModelLayout(m.config));
  EXPECT_TRUE(resolved.isOk()) << resolved.status().toString();
  std::map<WeightEncoding, int> counts;
  if (!resolved.isOk())
    return counts;
  EXPECT_TRUE(resolved->unclaimed.empty())
      << "unclaimed: " << resolved->unclaimed.front();
  for (const LinearWeight &w : resolved->linears)
    ++counts[w.encoding];
  if (out)
    *out = std::move(resolved).value();
  return counts;
}

using Counts = std::map<WeightEncoding, int>;
constexpr WeightEncoding kDense = WeightEncoding::Dense;
constexpr WeightEncoding kFp8 = WeightEncoding::Fp8Block;
constexpr WeightEncoding kMxfp4 = WeightEncoding::Mxfp4;

// Linears in the tiny GLM-5 model: lm_head; per layer 5 MLA + 3 indexer
// (absent on the shared layer 2); dense MLP 3 (layer 0); MoE 16 x 3 + 3;
// MTP eh_proj.
constexpr int kGlm5TinyLinears = 1 + 5 * 5 + 3 * 4 + 3 + 51 * 4 + 1;

TEST(WeightCatalogFixtures, Glm5Bf16AndSharded) {
  EXPECT_EQ(classify(loadFixture("glm5-tiny-dev")),
            (Counts{{kDense, kGlm5TinyLinears}}));
  EXPECT_EQ(classify(loadPath(kilnGeneratedFixture("glm5-tiny-dev-sharded"))),
            (Counts{{kDense, kGlm5TinyLinears}}));
}

TEST(WeightCatalogFixtures, Glm5Fp8) {
  // BF16: lm_head, indexer.weights_proj x 4, eh_proj.
  EXPECT_EQ(classify(loadFixture("glm5-tiny-dev-fp8")),
            (Counts{{kDense, 6}, {kFp8, kGlm5TinyLinears - 6}}));
  Loaded m = loadFixture("glm5-tiny-dev-fp8");
  WeightCatalog catalog(m.ckpt, m.config);
  auto w = catalog.linear("model.layers.0.self_attn.q_b_proj", 384, 128);
  ASSERT_TRUE(w.isOk()) << w.status().toString();
  EXPECT_EQ(w->encoding, kFp8);
  EXPECT_EQ(w->weight->name, "model.layers.0.self_attn.q_b_proj.weight");
  EXPECT_EQ(w->scale->name,
            "model.layers.0.self_attn.q_b_proj.weight_scale_inv");
  EXPECT_EQ(w->scale->describe(), "F32[3, 1]");
}

TEST(WeightCatalogFixtures, Glm5Mxfp4RoutedAndShared) {
  // Layers 1-3: 16 routed x 3 + 3 shared; MTP layer 4 stays BF16.
  ResolvedWeights all;
  EXPECT_EQ(classify(loadFixture("glm5-tiny-dev-mxfp4"), &all),
            (Counts{{kDense, kGlm5TinyLinears - 153}, {kMxfp4, 153}}));
  for (const LinearWeight &w : all.linears) {
    bool mtp = w.module.rfind("model.layers.4.", 0) == 0;
    bool expert = w.module.find("experts.") != std::string::npos;
    EXPECT_EQ(w.encoding, expert && !mtp ? kMxfp4 : kDense) << w.module;
  }
  Loaded m = loadFixture("glm5-tiny-dev-mxfp4");
  WeightCatalog catalog(m.ckpt, m.config);
  auto w = catalog.linear("model.layers.3.mlp.experts.5.gate_proj", 128, 256);
  ASSERT_TRUE(w.isOk()) << w.status().toString();
  EXPECT_EQ(w->encoding, kMxfp4);
  EXPECT_EQ(w->weight->describe(), "U8[128, 128]");
  EXPECT_EQ(w->scale->name,
            "model.layers.3.mlp.experts.5.gate_proj.weight_scale");
  EXPECT_EQ(w->scale->describe(), "U8[128, 8]");
}

TEST(WeightCatalogFixtures, Glm5Mxfp4RoutedOnly) {
  ResolvedWeights all;
  EXPECT_EQ(classify(loadFixture("glm5-tiny-dev-mxfp4-routedonly"), &all),
            (Counts{{kDense, kGlm5TinyLinears - 144}, {kMxfp4, 144}}));
  for (const LinearWeight &w : all.linears)
    if (w.module.find("shared_experts") != std::string::npos)
      EXPECT_EQ(w.encoding, kDense) << w.module;
}

TEST(WeightCatalogFixtures, Glm45WithBiasesAndMtpCopies) {
  ResolvedWeights all;
  // lm_head; 3 layers x 4 attention; dense MLP 3; 2 MoE x (8 x 3 + 3);
  // MTP: attention 4 + MoE 27 + eh_proj + shared_head.head.
  EXPECT_EQ(classify(loadFixture("glm45-tiny-random"), &all),
            (Counts{{kDense, 1 + 12 + 3 + 54 + 4 + 27 + 2}}));
  int biases = 0;
  for (const LinearWeight &w : all.linears)
    biases += w.bias != nullptr;
  EXPECT_EQ(biases, 4 * 3); // q, k, v in 3 layers + MTP
}

// A checkpoint written on the fly with a hand-built config.
class CatalogTest : public ::testing::Test {
protected:
  void write(const std::vector<TensorDecl> &decls) {
    writeFilled(dir.file("model.safetensors"), decls);
    auto opened = Checkpoint::open(dir.path());
    ASSERT_TRUE(opened.isOk()) << opened.status().toString();
    ckpt = std::move(opened).value();
  }
  Result<LinearWeight> linear(const std::string &module, int64_t out,
                              int64_t in, bool bias = false,
                              CatalogOptions options = {}) {
    return WeightCatalog(ckpt, config, options).linear(module, out, in, bias);
  }
  void useQuark(std::vector<std::string> exclude) {
    config.quant.method = QuantMethod::QuarkMxfp4;
    config.quant.excluded = std::move(exclude);
  }
  void useFp8(std::vector<std::string> notConvert) {
    config.quant.method = QuantMethod::Fp8Block;
    config.quant.excluded = std::move(notConvert);
  }

  TempDir dir;
  Checkpoint ckpt;
  GlmConfig config = [] {
    GlmConfig c;
    c.numHiddenLayers = 1;
    c.numNextnPredictLayers = 1;
    return c;
  }();
};

TEST_F(CatalogTest, MissingTensor) {
  write({{"other.weight", Dtype::BF16, {1}}});
  auto r = linear("model.layers.0.mlp.gate_proj", 4, 64);
  EXPECT_ERROR_CONTAINS(r, "'model.layers.0.mlp.gate_proj.weight' is missing",
                        "[4, 64]");
  EXPECT_EQ(r.status().code(), StatusCode::NotFound);
  EXPECT_ERROR_CONTAINS(linear("x.weight", 4, 64), "without '.weight'");
}

TEST_F(CatalogTest, WrongShape) {
  write({{"x.weight", Dtype::BF16, {4, 32}}});
  EXPECT_ERROR_CONTAINS(linear("x", 4, 64), "model.safetensors",
                        "tensor 'x.weight'",
                        "expected BF16, F16 or F32[4, 64], found BF16[4, 32]");
}

TEST_F(CatalogTest, WrongDtype) {
  write({{"x.weight", Dtype::I32, {4, 64}}});
  EXPECT_ERROR_CONTAINS(linear("x", 4, 64), "tensor 'x.weight'",
                        "found I32[4, 64]");
  write({{"x.weight", Dtype::F8_E4M3, {4, 64}}});
  EXPECT_ERROR_CONTAINS(linear("x", 4, 64), "F8_E4M3[4, 64]",
                        "'x.weight_scale_inv' is missing");
}

TEST_F(CatalogTest, Fp8ScaleShapeFollowsBlocks) {
  useFp8({});
  write({{"x.weight", Dtype::F8_E4M3, {300, 129}},
         {"x.weight_scale_inv", Dtype::F32, {3, 2}}});
  auto w = linear("x", 300, 129);
  ASSERT_TRUE(w.isOk()) << w.status().toString();
  EXPECT_EQ(w->encoding, WeightEncoding::Fp8Block);
  write({{"x.weight", Dtype::F8_E4M3, {300, 129}},
         {"x.weight_scale_inv", Dtype::F32, {3, 1}}});
  EXPECT_ERROR_CONTAINS(linear("x", 300, 129), "'x.weight_scale_inv'",
                        "expected F32[3, 2], found F32[3, 1]");
}

TEST_F(CatalogTest, Mxfp4Shapes) {
  useQuark({});
  write({{"x.weight", Dtype::U8, {8, 32}},
         {"x.weight_scale", Dtype::U8, {8, 2}}});
  auto w = linear("x", 8, 64);
  ASSERT_TRUE(w.isOk()) << w.status().toString();
  EXPECT_EQ(w->encoding, WeightEncoding::Mxfp4);
  EXPECT_ERROR_CONTAINS(linear("x", 8, 128), "'x.weight'",
                        "expected U8[8, 64], found U8[8, 32]");
  EXPECT_ERROR_CONTAINS(linear("x", 8, 48), "not a multiple of the 32");
  write({{"x.weight", Dtype::U8, {8, 32}}});
  EXPECT_ERROR_CONTAINS(linear("x", 8, 64), "'x.weight_scale' is missing");
}

TEST_F(CatalogTest, QuantizedTensorTheConfigExcludes) {
  useQuark({"*self_attn*"});
  write({{"model.layers.0.self_attn.o_proj.weight", Dtype::U8, {8, 32}},
         {"model.layers.0.self_attn.o_proj.weight_scale", Dtype::U8, {8, 2}}});
  EXPECT_ERROR_CONTAINS(linear("model.layers.0.self_attn.o_proj", 8, 64),
                        "'model.layers.0.self_attn.o_proj.weight'",
                        "is quantized (mxfp4",
                        "excludes module 'model.layers.0.self_attn.o_proj'");
  // Without the cross-check the tensors decide.
  CatalogOptions lax;
  lax.checkQuantConfig = false;
  EXPECT_TRUE(
      linear("model.layers.0.self_attn.o_proj", 8, 64, false, lax).isOk());
  // Quantized tensors with no quantization_config at all.
  config.quant = QuantConfig();
  EXPECT_ERROR_CONTAINS(linear("model.layers.0.self_attn.o_proj", 8, 64),
                        "no quantization_config");
  // FP8 tensors under a Quark config.
  useQuark({});
  write({{"x.weight", Dtype::F8_E4M3, {8, 8}},
         {"x.weight_scale_inv", Dtype::F32, {1, 1}}});
  EXPECT_ERROR_CONTAINS(linear("x", 8, 8), "is fp8-block",
                        "quant_method \"quark\"");
}

TEST_F(CatalogTest, UnquantizedTensorTheConfigQuantizes) {
  useQuark({"*self_attn*"});
  write({{"model.layers.0.mlp.experts.0.up_proj.weight", Dtype::BF16, {8, 64}},
         {"model.layers.1.eh_proj.weight", Dtype::BF16, {8, 16}}});
  EXPECT_ERROR_CONTAINS(
      linear("model.layers.0.mlp.experts.0.up_proj", 8, 64),
      "'model.layers.0.mlp.experts.0.up_proj.weight' is unquantized "
      "(BF16[8, 64])",
      "quant_method \"quark\"", "should be quantized");
  // The MTP layer (layer 1 here) is judged by its tensors unless strict.
  EXPECT_TRUE(linear("model.layers.1.eh_proj", 8, 16).isOk());
  CatalogOptions strict;
  strict.strictMtp = true;
  EXPECT_ERROR_CONTAINS(linear("model.layers.1.eh_proj", 8, 16, false, strict),
                        "should be quantized");
  useFp8({"mlp.experts.0.up_proj"});
  EXPECT_TRUE(linear("model.layers.0.mlp.experts.0.up_proj", 8, 64).isOk());
}

TEST_F(CatalogTest, Biases) {
  write({{"q.weight", Dtype::BF16, {4, 8}},
         {"q.bias", Dtype::F32, {4}},
         {"o.weight", Dtype::BF16, {4, 8}},
         {"o.bias", Dtype::BF16, {4}},
         {"k.weight", Dtype::BF16, {4, 8}}});
  auto q = linear("q", 4, 8, /*bias=*/true);
  ASSERT_TRUE(q.isOk()) << q.status().toString();
  EXPECT_EQ(q->bias->name, "q.bias");
  EXPECT_ERROR_CONTAINS(linear("o", 4, 8), "'o.bias'",
                        "expected to have no bias");
  EXPECT_ERROR_CONTAINS(linear("k", 4, 8, true), "'k.bias' is missing");
}

TEST_F(CatalogTest, PlainTensors) {
  write({{"n.weight", Dtype::BF16, {8}},
         {"b", Dtype::F32, {8}},
         {"bad", Dtype::F8_E4M3, {8}}});
  WeightCatalog catalog(ckpt, config);
  EXPECT_TRUE(catalog.plain("n.weight", {8}).isOk());
  EXPECT_TRUE(catalog.plain("b", {8}).isOk());
  EXPECT_ERROR_CONTAINS(catalog.plain("n.weight", {16}),
                        "expected BF16 or F32[16], found BF16[8]");
  EXPECT_ERROR_CONTAINS(catalog.plain("bad", {8}), "found F8_E4M3[8]");
  EXPECT_ERROR_CONTAINS(catalog.plain("gone", {8}), "'gone' is missing");
}

TEST(WeightCatalogIndexShare, ChecksIndexerTensorsAgainstConfig) {
  Loaded m = loadFixture("glm5-tiny-dev");
  m.config.indexerTypes[3] = IndexerType::Shared;
  WeightCatalog catalog(m.ckpt, m.config);
  EXPECT_ERROR_CONTAINS(catalog.resolve(buildModelLayout(m.config)),
                        "model.layers.3.self_attn.indexer.",
                        "indexer \"shared\"");
  m.config.indexerTypes[3] = IndexerType::Full;
  m.config.indexerTypes[2] = IndexerType::Full;
  EXPECT_ERROR_CONTAINS(catalog.resolve(buildModelLayout(m.config)),
                        "'model.layers.2.self_attn.indexer.wq_b.weight' is "
                        "missing");
}

} // namespace
} // namespace kiln::glm
