//===- CheckpointLimitsTest.cpp - CheckpointLimits on sharded indexes -----===//
//
// Each limit of Checkpoint::open, lowered so the test stays small: the
// error is ResourceExhausted and names the limit and the value found, and a
// checkpoint exactly at the limit opens.
//
//===----------------------------------------------------------------------===//

#include "frontends/glm/Checkpoint.h"
#include "test/unit/checkpoint/TestUtil.h"

using namespace kiln;
using namespace kiln::glm;
using namespace kiln::glm::testing;

namespace {

// Three shards: s1 = {a, b}, s2 = {c}, s3 = {d}.
class CheckpointLimitsTest : public ::testing::Test {
protected:
  void SetUp() override {
    writeFilled(dir.file("s1.safetensors"),
                {{"a", Dtype::F32, {2}}, {"b", Dtype::BF16, {3}}});
    writeFilled(dir.file("s2.safetensors"), {{"c", Dtype::U8, {5}}});
    writeFilled(dir.file("s3.safetensors"), {{"d", Dtype::U8, {1}}});
    ASSERT_TRUE(
        writeSafetensorsIndex(dir.file(kIndexFileName), map, 20).isOk());
  }

  TempDir dir;
  std::map<std::string, std::string> map = {{"a", "s1.safetensors"},
                                            {"b", "s1.safetensors"},
                                            {"c", "s2.safetensors"},
                                            {"d", "s3.safetensors"}};
};

} // namespace

TEST_F(CheckpointLimitsTest, DefaultsMatchTheConstants) {
  CheckpointLimits limits;
  EXPECT_EQ(limits.maxIndexBytes, kMaxIndexBytes);
  EXPECT_EQ(limits.maxShards, kMaxShards);
  EXPECT_EQ(limits.maxIndexTensors, kMaxIndexTensors);
  ASSERT_OK(Checkpoint::open(dir.path()));
}

TEST_F(CheckpointLimitsTest, IndexTensorCount) {
  CheckpointLimits limits;
  limits.maxIndexTensors = 4;
  ASSERT_OK(Checkpoint::open(dir.path(), limits));
  limits.maxIndexTensors = 3;
  auto r = Checkpoint::open(dir.path(), limits);
  EXPECT_ERROR_CONTAINS(r, kIndexFileName, "weight_map tensor count",
                        "maxIndexTensors (3)", ": 4 read so far");
  EXPECT_EQ(r.status().code(), StatusCode::ResourceExhausted);
}

TEST_F(CheckpointLimitsTest, IndexTensorNameLength) {
  std::string longName(40, 'n');
  writeBytes(dir.file(kIndexFileName),
             "{\"weight_map\": {\"" + longName + "\": \"s1.safetensors\"}}");
  CheckpointLimits limits;
  limits.safetensors.maxTensorNameBytes = 40;
  // At the limit the name is read (and then missing from s1).
  EXPECT_ERROR_CONTAINS(Checkpoint::open(dir.path(), limits),
                        "does not contain it");
  limits.safetensors.maxTensorNameBytes = 39;
  auto r = Checkpoint::open(dir.path(), limits);
  EXPECT_ERROR_CONTAINS(r, kIndexFileName, "maxTensorNameBytes (39)",
                        ": 40 bytes");
  EXPECT_EQ(r.status().code(), StatusCode::ResourceExhausted);
}

TEST_F(CheckpointLimitsTest, IndexBytes) {
  uint64_t size = readBytes(dir.file(kIndexFileName)).size();
  CheckpointLimits limits;
  limits.maxIndexBytes = size;
  ASSERT_OK(Checkpoint::open(dir.path(), limits));
  limits.maxIndexBytes = size - 1;
  auto r = Checkpoint::open(dir.path(), limits);
  std::string found = ": " + std::to_string(size) + " bytes";
  EXPECT_ERROR_CONTAINS(r, kIndexFileName, "maxIndexBytes", found.c_str());
  EXPECT_EQ(r.status().code(), StatusCode::ResourceExhausted);
}

TEST_F(CheckpointLimitsTest, ShardCount) {
  CheckpointLimits limits;
  limits.maxShards = 3;
  ASSERT_OK(Checkpoint::open(dir.path(), limits));
  limits.maxShards = 2;
  auto r = Checkpoint::open(dir.path(), limits);
  EXPECT_ERROR_CONTAINS(r, "maxShards (2)", ": 3");
  EXPECT_EQ(r.status().code(), StatusCode::ResourceExhausted);
}

TEST_F(CheckpointLimitsTest, SafetensorsLimitsReachEveryShard) {
  CheckpointLimits limits;
  limits.safetensors.maxTensorsPerFile = 1;
  auto r = Checkpoint::open(dir.path(), limits);
  EXPECT_ERROR_CONTAINS(r, "s1.safetensors", "maxTensorsPerFile (1)", ": 2");
  EXPECT_EQ(r.status().code(), StatusCode::ResourceExhausted);
}
