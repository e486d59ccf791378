//===- DumpTest.cpp - kiln-dump's JSON ------------------------------------===//

#include "test/unit/artifact/SampleArtifact.h"
#include "test/unit/artifact/TestFiles.h"
#include "tools/kiln-dump/ArtifactJson.h"

#include <gtest/gtest.h>

using namespace kiln;
using namespace kiln::artifact;
using namespace kiln::artifact::test;

namespace {

class Dump : public TempDirTest {};

TEST_F(Dump, RendersWeightsPlansAndTokenizer) {
  ASSERT_TRUE(writeSample(file("model.kiln")).isOk());
  auto artifact = Artifact::open(file("model.kiln"));
  ASSERT_TRUE(artifact.isOk());
  dump::DumpOptions options;
  options.weights = true;
  options.plans = true;
  auto json = dump::dumpArtifact(**artifact, options);
  ASSERT_TRUE(json.isOk()) << json.status().toString();
  const auto &j = *json;

  EXPECT_EQ(j["format_version"], FORMAT_VERSION);
  EXPECT_EQ(j["config"]["family"], "glm_moe_dsa");
  EXPECT_EQ(j["config"]["config_json"]["model_type"], "glm_moe_dsa");
  EXPECT_EQ(j["files"][0]["name"], "model.kiln");

  const auto &weights = j["weights"];
  EXPECT_EQ(weights["count"], 3);
  EXPECT_EQ(weights["by_layout"]["Mxfp4"]["bits_per_param"], 4.25);
  EXPECT_EQ(weights["by_layout"]["Dense"]["bits_per_param"], 16.0);
  EXPECT_EQ(weights["by_layout"]["Fp8Block128"]["params"], 26000);
  const auto &experts = weights["tensors"][1];
  EXPECT_EQ(experts["name"], EXPERTS);
  EXPECT_EQ(experts["layout"], "Mxfp4");
  EXPECT_EQ(experts["dtype"], "F4E2M1");
  EXPECT_EQ(experts["shape"], nlohmann::ordered_json({2, 8, 64}));
  EXPECT_EQ(experts["bytes"], EXPERTS_BYTES + EXPERTS_SCALE_BYTES);
  EXPECT_EQ(experts["bits_per_param"], 4.25);
  EXPECT_EQ(experts["scales"]["bytes"], EXPERTS_SCALE_BYTES);

  const auto &decode = j["plans"][0];
  EXPECT_EQ(decode["name"], "decode");
  EXPECT_EQ(decode["inputs"], nlohmann::ordered_json({"token_ids"}));
  EXPECT_EQ(decode["outputs"], nlohmann::ordered_json({"logits", "hidden"}));
  const auto &moe = decode["dispatches"][1];
  EXPECT_EQ(moe["kernel"], "moe");
  EXPECT_EQ(moe["args"],
            nlohmann::ordered_json(
                {"buffer:hidden", std::string("weight:") + EXPERTS,
                 "cache:layers.0.latent", "none", "buffer:logits"}));
  // Parameters by the names Kernels.td gives them.
  EXPECT_EQ(moe["params"],
            nlohmann::ordered_json({{"top_k", 8},
                                    {"n_group", 2},
                                    {"topk_group", 1},
                                    {"norm_topk_prob", true},
                                    {"block_size", 64},
                                    {"scale", 2.5},
                                    {"expert_offset", 0},
                                    {"shared_own_rows", false}}));
  // The sample's first kernel, "embed", is not one Kernels.td declares: its
  // stored table's type is shown instead.
  EXPECT_EQ(decode["dispatches"][0]["params"],
            nlohmann::ordered_json({{"!table", "NONE"}}));
  EXPECT_EQ(decode["buffers"][2]["rows"], "Selected");

  EXPECT_EQ(j["tokenizer"]["vocab_size"], 6);
  EXPECT_EQ(j["tokenizer"]["merges"], 2);
  EXPECT_EQ(j["tokenizer"]["added_tokens"][0]["content"], "<|user|>");
  EXPECT_EQ(j["kernels"][0]["symbols"][0]["symbol"], "kiln_embed");
  EXPECT_EQ(j["caches"][0]["dtype"], "BF16");
}

TEST_F(Dump, SummaryLeavesOutTheLists) {
  ASSERT_TRUE(writeSample(file("model.kiln")).isOk());
  auto artifact = Artifact::open(file("model.kiln"));
  ASSERT_TRUE(artifact.isOk());
  auto json = dump::dumpArtifact(**artifact, {});
  ASSERT_TRUE(json.isOk());
  EXPECT_FALSE(json->at("weights").contains("tensors"));
  EXPECT_FALSE(json->at("plans")[0].contains("dispatches"));
  EXPECT_EQ(json->at("plans")[0]["dispatch_count"], 2);
}

TEST_F(Dump, ExtractsCodeObjects) {
  ASSERT_TRUE(writeSample(file("model.kiln")).isOk());
  auto artifact = Artifact::open(file("model.kiln"));
  ASSERT_TRUE(artifact.isOk());
  dump::DumpOptions options;
  options.extractKernelsDir = file("kernels");
  auto json = dump::dumpArtifact(**artifact, options);
  ASSERT_TRUE(json.isOk()) << json.status().toString();
  std::string extracted = file("kernels/x86_64.0.so");
  EXPECT_EQ(json->at("code_objects")[0]["extracted"], extracted);
  EXPECT_EQ(readBytes(extracted), sampleBytes(CODE_BYTES, 5));
}

TEST(DumpNames, CodeObjectFileNames) {
  EXPECT_EQ(*dump::codeObjectFileName("x86_64", 0), "x86_64.0.so");
  EXPECT_EQ(*dump::codeObjectFileName("gfx950", 2), "gfx950.2.hsaco");
  EXPECT_EQ(*dump::codeObjectFileName("riscv", 1), "riscv.1.bin");
  auto bad = dump::codeObjectFileName("../x86_64", 3);
  ASSERT_FALSE(bad.isOk());
  EXPECT_NE(bad.status().message().find("code_objects[3]: target '../x86_64'"),
            std::string::npos);
}

} // namespace
