//===- CheckpointTest.cpp - Checkpoint directories, fixtures, shards ------===//

#include "frontends/glm/Checkpoint.h"

#include "../Fixtures.h"
#include "TestUtil.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <map>

namespace kiln::glm {
namespace {

using testing::TempDir;
using testing::writeBytes;
using testing::writeFilled;

std::map<std::string, int> dtypeCounts(const Checkpoint &ckpt) {
  std::map<std::string, int> counts;
  for (const std::string &name : ckpt.names())
    ++counts[dtypeName(ckpt.find(name)->dtype)];
  return counts;
}

Checkpoint openPath(const std::string &path) {
  auto ckpt = Checkpoint::open(path);
  EXPECT_TRUE(ckpt.isOk()) << ckpt.status().toString();
  return std::move(ckpt).value();
}

Checkpoint openFixture(const std::string &name) {
  return openPath(kilnFixture(name));
}

TEST(CheckpointFixtures, Glm5Bf16) {
  Checkpoint ckpt = openFixture("glm5-tiny-dev");
  EXPECT_FALSE(ckpt.isSharded());
  EXPECT_EQ(ckpt.size(), 287u);
  EXPECT_EQ(dtypeCounts(ckpt),
            (std::map<std::string, int>{{"BF16", 283}, {"F32", 4}}));
  const TensorInfo *embed = ckpt.find("model.embed_tokens.weight");
  ASSERT_NE(embed, nullptr);
  EXPECT_EQ(embed->describe(), "BF16[2048, 256]");
  EXPECT_EQ(embed->byteSize, 2048u * 256 * 2);
  EXPECT_EQ(
      ckpt.find("model.layers.1.mlp.gate.e_score_correction_bias")->describe(),
      "F32[16]");
  EXPECT_EQ(ckpt.find("model.layers.0.self_attn.kv_a_proj_with_mqa.weight")
                ->describe(),
            "BF16[80, 256]");
  // Layer 2 is an IndexShare "shared" layer: no indexer tensors.
  EXPECT_EQ(ckpt.find("model.layers.2.self_attn.indexer.wk.weight"), nullptr);
  EXPECT_TRUE(std::is_sorted(ckpt.names().begin(), ckpt.names().end()));
}

TEST(CheckpointFixtures, Glm5Fp8) {
  Checkpoint ckpt = openFixture("glm5-tiny-dev-fp8");
  EXPECT_EQ(ckpt.size(), 527u);
  EXPECT_EQ(dtypeCounts(ckpt),
            (std::map<std::string, int>{
                {"BF16", 43}, {"F32", 244}, {"F8_E4M3", 240}}));
  EXPECT_EQ(ckpt.find("model.layers.0.mlp.down_proj.weight")->describe(),
            "F8_E4M3[256, 512]");
  EXPECT_EQ(
      ckpt.find("model.layers.0.mlp.down_proj.weight_scale_inv")->describe(),
      "F32[2, 4]");
}

TEST(CheckpointFixtures, Glm5Mxfp4) {
  Checkpoint ckpt = openFixture("glm5-tiny-dev-mxfp4");
  EXPECT_EQ(ckpt.size(), 440u);
  EXPECT_EQ(dtypeCounts(ckpt), (std::map<std::string, int>{
                                   {"BF16", 130}, {"F32", 4}, {"U8", 306}}));
  EXPECT_EQ(
      ckpt.find("model.layers.1.mlp.experts.0.down_proj.weight")->describe(),
      "U8[256, 64]");
  EXPECT_EQ(ckpt.find("model.layers.1.mlp.experts.0.down_proj.weight_scale")
                ->describe(),
            "U8[256, 4]");
}

TEST(CheckpointFixtures, Glm5Mxfp4RoutedOnly) {
  Checkpoint ckpt = openFixture("glm5-tiny-dev-mxfp4-routedonly");
  EXPECT_EQ(ckpt.size(), 431u);
  EXPECT_EQ(dtypeCounts(ckpt), (std::map<std::string, int>{
                                   {"BF16", 139}, {"F32", 4}, {"U8", 288}}));
  EXPECT_EQ(
      ckpt.find("model.layers.1.mlp.shared_experts.up_proj.weight")->describe(),
      "BF16[128, 256]");
}

TEST(CheckpointFixtures, Glm45) {
  Checkpoint ckpt = openFixture("glm45-tiny-random");
  EXPECT_EQ(ckpt.size(), 143u);
  EXPECT_EQ(dtypeCounts(ckpt),
            (std::map<std::string, int>{{"BF16", 140}, {"F32", 3}}));
  EXPECT_EQ(ckpt.find("model.layers.0.self_attn.q_proj.bias")->describe(),
            "BF16[256]");
  EXPECT_NE(ckpt.find("model.layers.3.shared_head.head.weight"), nullptr);
}

TEST(CheckpointFixtures, ShardedMatchesSingleFile) {
  Checkpoint single = openFixture("glm5-tiny-dev");
  Checkpoint sharded = openPath(kilnGeneratedFixture("glm5-tiny-dev-sharded"));
  EXPECT_TRUE(sharded.isSharded());
  EXPECT_EQ(sharded.files().size(), 2u);
  ASSERT_EQ(sharded.names(), single.names());
  for (const std::string &name : single.names()) {
    const TensorInfo *a = single.find(name);
    const TensorInfo *b = sharded.find(name);
    ASSERT_NE(b, nullptr) << name;
    EXPECT_EQ(a->dtype, b->dtype) << name;
    EXPECT_EQ(a->shape, b->shape) << name;
    ASSERT_EQ(a->byteSize, b->byteSize) << name;
    EXPECT_EQ(std::memcmp(a->data, b->data, a->byteSize), 0) << name;
  }
  // Opening the index file directly works too.
  auto direct = Checkpoint::open(kilnGeneratedFixture(
      "glm5-tiny-dev-sharded/model.safetensors.index.json"));
  ASSERT_TRUE(direct.isOk()) << direct.status().toString();
  EXPECT_EQ(direct->size(), 287u);
}

TEST(Checkpoint, GetNamesMissingTensor) {
  Checkpoint ckpt = openFixture("glm5-tiny-dev");
  auto r = ckpt.get("model.layers.9.nope.weight");
  EXPECT_ERROR_CONTAINS(r, "glm5-tiny-dev", "'model.layers.9.nope.weight'",
                        "not in the checkpoint");
  EXPECT_EQ(r.status().code(), StatusCode::NotFound);
}

// A two-shard checkpoint: s1 = {a, b}, s2 = {c}.
class ShardedDir : public ::testing::Test {
protected:
  void SetUp() override {
    writeFilled(dir.file("s1.safetensors"),
                {{"a", Dtype::F32, {2}}, {"b", Dtype::BF16, {3}}});
    writeFilled(dir.file("s2.safetensors"), {{"c", Dtype::U8, {5}}});
  }
  void writeIndex(const std::map<std::string, std::string> &map) {
    ASSERT_TRUE(
        writeSafetensorsIndex(dir.file(kIndexFileName), map, 19).isOk());
  }
  TempDir dir;
  std::map<std::string, std::string> good = {{"a", "s1.safetensors"},
                                             {"b", "s1.safetensors"},
                                             {"c", "s2.safetensors"}};
};

TEST_F(ShardedDir, OpensValidIndex) {
  writeIndex(good);
  auto ckpt = Checkpoint::open(dir.path());
  ASSERT_TRUE(ckpt.isOk()) << ckpt.status().toString();
  EXPECT_EQ(ckpt->names(), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(ckpt->find("c")->file, dir.file("s2.safetensors"));
}

TEST_F(ShardedDir, RejectsIndexNamingMissingShard) {
  good["c"] = "s3.safetensors";
  writeIndex(good);
  auto r = Checkpoint::open(dir.path());
  EXPECT_ERROR_CONTAINS(r, kIndexFileName, "shard 's3.safetensors'",
                        "tensor 'c'", "does not exist");
  EXPECT_EQ(r.status().code(), StatusCode::NotFound);
}

TEST_F(ShardedDir, RejectsTensorInIndexAbsentFromShard) {
  good["d"] = "s2.safetensors";
  writeIndex(good);
  EXPECT_ERROR_CONTAINS(Checkpoint::open(dir.path()), "tensor 'd'",
                        "shard 's2.safetensors'", "does not contain it");
}

TEST_F(ShardedDir, RejectsTensorInShardAbsentFromIndex) {
  good.erase("b");
  writeIndex(good);
  EXPECT_ERROR_CONTAINS(Checkpoint::open(dir.path()), "s1.safetensors",
                        "tensor 'b' is not listed in");
}

TEST_F(ShardedDir, RejectsTensorListedUnderAnotherShard) {
  writeFilled(dir.file("s2.safetensors"),
              {{"c", Dtype::U8, {5}}, {"a", Dtype::F32, {2}}});
  writeIndex(good);
  EXPECT_ERROR_CONTAINS(Checkpoint::open(dir.path()), "s2.safetensors",
                        "tensor 'a' is listed", "'s1.safetensors', not this");
}

TEST_F(ShardedDir, RejectsShardOutsideDirectory) {
  good["c"] = "../s2.safetensors";
  writeIndex(good);
  EXPECT_ERROR_CONTAINS(Checkpoint::open(dir.path()),
                        "'../s2.safetensors' is not a plain file name");
}

TEST_F(ShardedDir, RejectsTruncatedShard) {
  writeIndex(good);
  std::string s2 = dir.file("s2.safetensors");
  std::filesystem::resize_file(s2, std::filesystem::file_size(s2) - 2);
  auto r = Checkpoint::open(dir.path());
  EXPECT_ERROR_CONTAINS(r, "s2.safetensors", "tensor 'c'", "truncated");
  EXPECT_EQ(r.status().code(), StatusCode::DataLoss);
}

TEST_F(ShardedDir, RejectsMalformedIndex) {
  writeBytes(dir.file(kIndexFileName), "{\"weight_map\": {\"a\": ");
  EXPECT_ERROR_CONTAINS(Checkpoint::open(dir.path()), kIndexFileName,
                        "not valid JSON");
  writeBytes(dir.file(kIndexFileName), "{\"metadata\": {}}");
  EXPECT_ERROR_CONTAINS(Checkpoint::open(dir.path()), "'weight_map' must be");
  writeBytes(dir.file(kIndexFileName), "{\"weight_map\": {\"a\": 3}}");
  EXPECT_ERROR_CONTAINS(Checkpoint::open(dir.path()),
                        "weight_map['a'] must be a shard file name");
  writeBytes(
      dir.file(kIndexFileName),
      R"({"weight_map": {"a": "s1.safetensors", "a": "s2.safetensors"}})");
  EXPECT_ERROR_CONTAINS(Checkpoint::open(dir.path()),
                        "names tensor 'a' more than once");
}

TEST_F(ShardedDir, RejectsAmbiguousAndEmptyDirectories) {
  writeIndex(good);
  writeFilled(dir.file(kSingleFileName), {{"a", Dtype::F32, {2}}});
  EXPECT_ERROR_CONTAINS(Checkpoint::open(dir.path()), "holds both",
                        "ambiguous");
  TempDir empty;
  auto r = Checkpoint::open(empty.path());
  EXPECT_ERROR_CONTAINS(r, "found neither");
  EXPECT_EQ(r.status().code(), StatusCode::NotFound);
}

} // namespace
} // namespace kiln::glm
