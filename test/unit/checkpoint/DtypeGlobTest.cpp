//===- DtypeGlobTest.cpp - Dtype names and fnmatch globs ------------------===//

#include "frontends/glm/Glob.h"
#include "frontends/glm/QuantConfig.h"
#include "support/Dtype.h"

#include "TestUtil.h"

#include <gtest/gtest.h>

namespace kiln::glm {
namespace {

TEST(Dtype, NamesRoundTripWithSizes) {
  struct Case {
    const char *name;
    Dtype dtype;
    uint64_t size;
  } cases[] = {{"BF16", Dtype::BF16, 2},       {"F16", Dtype::F16, 2},
               {"F32", Dtype::F32, 4},         {"F64", Dtype::F64, 8},
               {"F8_E4M3", Dtype::F8_E4M3, 1}, {"U8", Dtype::U8, 1},
               {"I8", Dtype::I8, 1},           {"I16", Dtype::I16, 2},
               {"I32", Dtype::I32, 4},         {"I64", Dtype::I64, 8},
               {"BOOL", Dtype::BOOL, 1}};
  for (const Case &c : cases) {
    Result<Dtype> parsed = parseDtype(c.name);
    ASSERT_TRUE(parsed.isOk()) << c.name;
    EXPECT_EQ(*parsed, c.dtype);
    EXPECT_STREQ(dtypeName(c.dtype), c.name);
    EXPECT_EQ(dtypeSize(c.dtype), c.size) << c.name;
  }
  EXPECT_TRUE(isFloatingPoint(Dtype::BF16));
  EXPECT_FALSE(isFloatingPoint(Dtype::U8));
}

TEST(Dtype, RejectsUnknownNames) {
  EXPECT_ERROR_CONTAINS(parseDtype("F4"), "unknown dtype 'F4'", "BF16");
  EXPECT_ERROR_CONTAINS(parseDtype("bf16"), "unknown dtype 'bf16'");
  EXPECT_ERROR_CONTAINS(parseDtype(""), "unknown dtype ''");
}

TEST(Glob, QuarkPatternsMatchHfModuleNames) {
  // The GLM.md 6.2 trap: dense MLPs, not routed experts.
  EXPECT_TRUE(globMatch("*mlp.gate_proj", "model.layers.0.mlp.gate_proj"));
  EXPECT_FALSE(
      globMatch("*mlp.gate_proj", "model.layers.3.mlp.experts.5.gate_proj"));
  EXPECT_FALSE(globMatch("*mlp.gate_proj",
                         "model.layers.3.mlp.shared_experts.gate_proj"));
  EXPECT_TRUE(globMatch("*mlp.gate", "model.layers.3.mlp.gate"));
  EXPECT_FALSE(globMatch("*mlp.gate", "model.layers.3.mlp.gate_proj"));
  EXPECT_TRUE(globMatch("*self_attn*", "model.layers.7.self_attn.q_a_proj"));
  EXPECT_TRUE(globMatch("*shared_experts*",
                        "model.layers.7.mlp.shared_experts.down_proj"));
  EXPECT_TRUE(globMatch("*layers.78.*", "model.layers.78.eh_proj"));
  EXPECT_FALSE(globMatch("*layers.78.*", "model.layers.7.eh_proj"));
  EXPECT_FALSE(globMatch("*layers.78.*", "model.layers.178.eh_proj"));
  EXPECT_TRUE(globMatch("*lm_head", "lm_head"));
  EXPECT_TRUE(globMatch("lm_head", "lm_head"));
  EXPECT_FALSE(globMatch("lm_head", "model.lm_head"));
}

TEST(Glob, FnmatchMetacharacters) {
  EXPECT_TRUE(globMatch("", ""));
  EXPECT_FALSE(globMatch("", "a"));
  EXPECT_TRUE(globMatch("*", ""));
  EXPECT_TRUE(globMatch("*", "a.b.c"));
  EXPECT_TRUE(globMatch("a?c", "abc"));
  EXPECT_FALSE(globMatch("a?c", "ac"));
  EXPECT_TRUE(globMatch("layers.[0-2].x", "layers.1.x"));
  EXPECT_FALSE(globMatch("layers.[0-2].x", "layers.3.x"));
  EXPECT_TRUE(globMatch("layers.[!0-2].x", "layers.3.x"));
  EXPECT_TRUE(globMatch("[]]", "]"));
  EXPECT_TRUE(globMatch("a[b", "a[b")); // unclosed '[' is literal
  EXPECT_TRUE(globMatch("*a*b*c", "xxaxxbxxc"));
  EXPECT_FALSE(globMatch("*a*b*c", "xxaxxcxxb"));
  // No exponential blow-up on adversarial patterns.
  std::string name(2000, 'a');
  EXPECT_FALSE(globMatch("*a*a*a*a*a*a*a*a*a*a*b", name));
  EXPECT_TRUE(isGlob("*x"));
  EXPECT_FALSE(isGlob("mlp.gate"));
}

TEST(QuantExclusion, Fp8MatchesWholeComponents) {
  QuantConfig q;
  q.method = QuantMethod::Fp8Block;
  q.excluded = {"mlp.gate", "indexer.weights_proj", "lm_head",
                "self_attn.indexers_proj"};
  EXPECT_TRUE(q.isExcluded("model.layers.1.mlp.gate"));
  EXPECT_FALSE(q.isExcluded("model.layers.0.mlp.gate_proj"));
  EXPECT_TRUE(q.isExcluded("model.layers.4.self_attn.indexer.weights_proj"));
  EXPECT_TRUE(q.isExcluded("lm_head"));
  EXPECT_FALSE(q.isExcluded("model.layers.4.self_attn.indexer.wk"));
  q.excluded = {"self_attn.indexers_proj"}; // the GLM-5.1 alias
  EXPECT_TRUE(q.isExcluded("model.layers.4.self_attn.indexer.weights_proj"));
}

TEST(QuantExclusion, QuarkUsesGlobs) {
  QuantConfig q;
  q.method = QuantMethod::QuarkMxfp4;
  q.excluded = {"*self_attn*",     "*mlp.gate",    "*lm_head",
                "*mlp.gate_proj",  "*mlp.up_proj", "*mlp.down_proj",
                "*shared_experts*"};
  EXPECT_TRUE(q.isExcluded("model.layers.0.mlp.gate_proj"));
  EXPECT_FALSE(q.isExcluded("model.layers.3.mlp.experts.5.gate_proj"));
  EXPECT_TRUE(q.isExcluded("model.layers.3.mlp.shared_experts.up_proj"));
  EXPECT_TRUE(q.isExcluded("model.layers.3.self_attn.o_proj"));
  EXPECT_FALSE(q.isExcluded("model.layers.78.eh_proj"));
  QuantConfig none;
  EXPECT_TRUE(none.isExcluded("anything"));
}

} // namespace
} // namespace kiln::glm
