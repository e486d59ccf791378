//===- ArtifactLimitsTest.cpp - Bounds on sizes the runtime derives -------===//
//
// ModelConfig values and buffer row shapes feed size arithmetic in the
// runtime (hidden x tokens, rows x row elements x dtype size); the loader
// bounds them. Each test writes a small artifact with one value at and one
// past its limit, and checks the message names the limit and the value.
//
//===----------------------------------------------------------------------===//

#include "runtime/artifact/Artifact.h"
#include "runtime/artifact/ArtifactChecks.h"
#include "runtime/artifact/ArtifactWriter.h"
#include "test/unit/artifact/TestFiles.h"

#include <gtest/gtest.h>

using namespace kiln;
using namespace kiln::artifact;
using namespace kiln::artifact::test;

namespace {

struct ConfigValues {
  int64_t hidden = 8, vocab = 16, layers = 1, positions = 64;
  int32_t mtp = 0;
  std::vector<int64_t> rowShape = {8};
};

class ArtifactLimits : public TempDirTest {
protected:
  std::string path() const { return file("model.kiln"); }

  // An artifact with no segments: a config and one plan with one buffer.
  void write(const ConfigValues &v) {
    auto writer = ArtifactWriter::create(path());
    ASSERT_TRUE(writer.isOk()) << writer.status().toString();
    flatbuffers::FlatBufferBuilder fbb;
    std::vector<flatbuffers::Offset<flatbuffers::String>> files;
    for (const std::string &name : (*writer)->fileNames())
      files.push_back(fbb.CreateString(name));
    std::vector<flatbuffers::Offset<fb::Buffer>> buffers = {
        fb::CreateBufferDirect(fbb, "hidden", fb::DType::F32, fb::Rows::Tokens,
                               &v.rowShape)};
    std::vector<flatbuffers::Offset<fb::Plan>> plans = {
        fb::CreatePlanDirect(fbb, "decode", &buffers)};
    auto config = fb::CreateModelConfigDirect(
        fbb, "glm_moe_dsa", nullptr, v.hidden, v.vocab, v.layers, v.positions,
        nullptr, 0, v.mtp, 0);
    fbb.Finish(fb::CreateArtifactDirect(fbb, "test", nullptr, &files, config, 0,
                                        nullptr, nullptr, nullptr, nullptr,
                                        &plans),
               fb::ArtifactIdentifier());
    Status status = (*writer)->finish(fbb);
    ASSERT_TRUE(status.isOk()) << status.toString();
  }

  void expectAccepted(const ConfigValues &v) {
    write(v);
    auto opened = Artifact::open(path());
    EXPECT_TRUE(opened.isOk()) << opened.status().toString();
  }

  void expectRejected(const ConfigValues &v, std::vector<std::string> pieces) {
    write(v);
    auto opened = Artifact::open(path());
    ASSERT_FALSE(opened.isOk()) << "expected a failure";
    EXPECT_EQ(opened.status().code(), StatusCode::ResourceExhausted)
        << opened.status().toString();
    for (const std::string &piece : pieces)
      EXPECT_NE(opened.status().message().find(piece), std::string::npos)
          << "missing \"" << piece << "\" in: " << opened.status().message();
  }
};

TEST_F(ArtifactLimits, HiddenSize) {
  ConfigValues v;
  v.hidden = MAX_HIDDEN_SIZE;
  expectAccepted(v);
  v.hidden = MAX_HIDDEN_SIZE + 1;
  expectRejected(
      v, {"config.hidden_size", "MAX_HIDDEN_SIZE (16777216)", ": 16777217"});
}

TEST_F(ArtifactLimits, VocabSize) {
  ConfigValues v;
  v.vocab = MAX_VOCAB_SIZE;
  expectAccepted(v);
  v.vocab = int64_t(1) << 40;
  expectRejected(
      v, {"config.vocab_size", "MAX_VOCAB_SIZE (16777216)", ": 1099511627776"});
}

TEST_F(ArtifactLimits, NumLayers) {
  ConfigValues v;
  v.layers = MAX_LAYERS;
  expectAccepted(v);
  v.layers = MAX_LAYERS + 1;
  expectRejected(v, {"config.num_layers", "MAX_LAYERS (4096)", ": 4097"});
}

TEST_F(ArtifactLimits, MaxPositionEmbeddings) {
  ConfigValues v;
  v.positions = MAX_DIM;
  expectAccepted(v);
  v.positions = INT64_MAX;
  expectRejected(v, {"config.max_position_embeddings", "MAX_DIM",
                     ": 9223372036854775807"});
}

TEST_F(ArtifactLimits, MtpLayers) {
  ConfigValues v;
  v.mtp = MAX_MTP_LAYERS;
  expectAccepted(v);
  v.mtp = MAX_MTP_LAYERS + 1;
  expectRejected(v, {"config.mtp_layers", "MAX_MTP_LAYERS (16)", ": 17"});
}

TEST_F(ArtifactLimits, BufferRowElements) {
  // Each dim is within MAX_DIM; their product is what overflows sizes.
  ConfigValues v;
  v.rowShape = {int64_t(1) << 25, int64_t(1) << 25};
  expectAccepted(v); // 2^50 = MAX_ELEMENTS
  v.rowShape = {int64_t(1) << 25, (int64_t(1) << 25) + 1};
  expectRejected(v, {"buffers[0] 'hidden'", "[33554432, 33554433]",
                     "MAX_ELEMENTS (1125899906842624)"});
  v.rowShape = {int64_t(1) << 40, int64_t(1) << 40, int64_t(1) << 40};
  expectRejected(v, {"[1099511627776, 1099511627776, 1099511627776]",
                     "MAX_ELEMENTS"}); // the product overflows 64 bits
}

} // namespace
