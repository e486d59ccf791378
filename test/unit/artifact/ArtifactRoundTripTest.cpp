//===- ArtifactRoundTripTest.cpp - Write an artifact, load it back --------===//

#include "runtime/artifact/Artifact.h"
#include "runtime/artifact/ArtifactWriter.h"
#include "test/unit/artifact/SampleArtifact.h"
#include "test/unit/artifact/TestFiles.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

using namespace kiln;
using namespace kiln::artifact;
using namespace kiln::artifact::test;

namespace {

class ArtifactRoundTrip : public TempDirTest {
protected:
  std::unique_ptr<Artifact> writeAndOpen(const SampleOptions &options = {}) {
    Status written = writeSample(file("model.kiln"), options);
    EXPECT_TRUE(written.isOk()) << written.toString();
    Result<std::unique_ptr<Artifact>> opened =
        Artifact::open(file("model.kiln"));
    EXPECT_TRUE(opened.isOk()) << opened.status().toString();
    return opened.isOk() ? std::move(*opened) : nullptr;
  }
};

void expectSegment(const Artifact &artifact, const fb::Extent &extent,
                   size_t size, uint32_t seed) {
  ASSERT_EQ(extent.size(), size);
  ASSERT_EQ(extent.offset() % SEGMENT_ALIGNMENT, 0u);
  const uint8_t *bytes = artifact.bytes(extent);
  ASSERT_NE(bytes, nullptr);
  std::vector<uint8_t> expected = sampleBytes(size, seed);
  EXPECT_EQ(std::memcmp(bytes, expected.data(), size), 0);
}

void expectAllSegments(const Artifact &artifact) {
  const auto *weights = artifact.meta()->weights();
  ASSERT_EQ(weights->size(), 3u);
  expectSegment(artifact, *weights->Get(0)->data(), EMBED_BYTES, 0);
  expectSegment(artifact, *weights->Get(1)->data(), EXPERTS_BYTES, 1);
  expectSegment(artifact, *weights->Get(1)->scales(), EXPERTS_SCALE_BYTES, 2);
  expectSegment(artifact, *weights->Get(2)->data(), WQ_BYTES, 3);
  expectSegment(artifact, *weights->Get(2)->scales(), WQ_SCALE_BYTES, 4);
  expectSegment(artifact, *artifact.meta()->code_objects()->Get(0)->data(),
                CODE_BYTES, 5);
}

TEST_F(ArtifactRoundTrip, OneFile) {
  auto artifact = writeAndOpen();
  ASSERT_TRUE(artifact);
  EXPECT_EQ(listDir(), std::vector<std::string>{"model.kiln"});
  EXPECT_EQ(artifact->fileCount(), 1u);
  EXPECT_EQ(artifact->path(), file("model.kiln"));
  const fb::Artifact &meta = *artifact->meta();
  EXPECT_EQ(meta.producer()->str(), "kiln-test");
  EXPECT_EQ(meta.config()->family()->str(), "glm_moe_dsa");
  EXPECT_EQ(meta.config()->vocab_size(), 16);
  EXPECT_EQ(meta.files()->Get(0)->str(), "model.kiln");
  EXPECT_EQ(meta.weights()->Get(1)->name()->str(), EXPERTS);
  EXPECT_EQ(meta.weights()->Get(1)->layout(), fb::WeightLayout::Mxfp4);
  EXPECT_EQ(meta.caches()->Get(0)->width(), 576);
  EXPECT_EQ(meta.kernels()->Get(0)->symbols()->Get(0)->symbol()->str(),
            "kiln_embed");
  EXPECT_EQ(meta.tokenizer()->vocab()->size(), 6u);
  EXPECT_EQ(meta.tokenizer()->added_tokens()->Get(0)->id(), 14);
  const fb::Plan *decode = artifact->findPlan("decode");
  ASSERT_NE(decode, nullptr);
  EXPECT_EQ(decode->dispatches()->size(), 2u);
  EXPECT_EQ(decode->dispatches()->Get(1)->args()->Get(2)->kind(),
            fb::ArgKind::Cache);
  EXPECT_NE(artifact->findPlan("prefill"), nullptr);
  EXPECT_EQ(artifact->findPlan("draft"), nullptr);
  expectAllSegments(*artifact);

  // Segments follow one another in file 0, each on a 4096 boundary, and
  // the metadata comes after the last.
  EXPECT_EQ(meta.weights()->Get(0)->data()->offset(), 4096u);
  EXPECT_EQ(meta.weights()->Get(1)->data()->offset(), 8192u);
  EXPECT_GT(artifact->header().metadataOffset,
            meta.code_objects()->Get(0)->data()->offset());
}

TEST_F(ArtifactRoundTrip, SplitsIntoFilesAtTheLimit) {
  // 12288 bytes a file: the header and two small segments fit; the 26000
  // byte segment is moved, while streaming, into a file of its own.
  SampleOptions options;
  options.maxFileBytes = 3 * 4096;
  auto artifact = writeAndOpen(options);
  ASSERT_TRUE(artifact);
  EXPECT_EQ(listDir(),
            (std::vector<std::string>{"model.kiln", "model.kiln.1",
                                      "model.kiln.2", "model.kiln.3"}));
  ASSERT_EQ(artifact->fileCount(), 4u);
  const fb::Artifact &meta = *artifact->meta();
  EXPECT_EQ(meta.files()->Get(3)->str(), "model.kiln.3");
  const fb::Weight &experts = *meta.weights()->Get(1);
  const fb::Weight &wq = *meta.weights()->Get(2);
  EXPECT_EQ(experts.data()->file(), 0u);
  EXPECT_EQ(experts.scales()->file(), 1u);
  EXPECT_EQ(wq.data()->file(), 2u);
  EXPECT_EQ(wq.data()->offset(), 4096u);
  EXPECT_EQ(wq.scales()->file(), 3u);
  EXPECT_EQ(meta.code_objects()->Get(0)->data()->file(), 3u);
  EXPECT_LE(artifact->fileSize(1), options.maxFileBytes);
  EXPECT_EQ(artifact->fileSize(2), 4096u + WQ_BYTES);
  EXPECT_LE(artifact->fileSize(3), options.maxFileBytes);
  expectAllSegments(*artifact);
}

TEST_F(ArtifactRoundTrip, SegmentLargerThanTheLimitGoesAlone) {
  auto writer = ArtifactWriter::create(file("big.kiln"), 8192);
  ASSERT_TRUE(writer.isOk()) << writer.status().toString();
  std::vector<uint8_t> big = sampleBytes(20000, 7), small = sampleBytes(10, 8);
  // The first segment of a file stays there whatever its size.
  auto a = (*writer)->writeSegment(big.data(), big.size());
  auto b = (*writer)->writeSegment(small.data(), small.size());
  auto c = (*writer)->writeSegment(big.data(), big.size());
  auto d = (*writer)->writeSegment(small.data(), small.size());
  ASSERT_TRUE(a.isOk() && b.isOk() && c.isOk() && d.isOk());
  EXPECT_EQ(a->file(), 0u);
  EXPECT_EQ(b->file(), 1u);
  EXPECT_EQ(c->file(), 2u);
  EXPECT_EQ(c->offset(), 4096u);
  EXPECT_EQ(d->file(), 3u);
  EXPECT_EQ((*writer)->fileNames(),
            (std::vector<std::string>{"big.kiln", "big.kiln.1", "big.kiln.2",
                                      "big.kiln.3"}));
}

TEST_F(ArtifactRoundTrip, NothingUnderTheFinalNameUntilFinish) {
  {
    auto writer = ArtifactWriter::create(file("model.kiln"));
    ASSERT_TRUE(writer.isOk());
    std::vector<uint8_t> bytes = sampleBytes(100, 1);
    ASSERT_TRUE((*writer)->writeSegment(bytes.data(), bytes.size()).isOk());
    std::vector<std::string> names = listDir();
    ASSERT_EQ(names.size(), 1u);
    EXPECT_EQ(names[0].rfind("model.kiln.tmp.", 0), 0u) << names[0];
  }
  // Destroyed without finish(): the temporary file is gone too.
  EXPECT_TRUE(listDir().empty());
}

TEST_F(ArtifactRoundTrip, WriterMisuseIsAnError) {
  auto tiny = ArtifactWriter::create(file("a.kiln"), 4096);
  ASSERT_FALSE(tiny.isOk());
  EXPECT_NE(tiny.status().message().find("at least 8192"), std::string::npos)
      << tiny.status().message();

  auto writer = ArtifactWriter::create(file("model.kiln"));
  ASSERT_TRUE(writer.isOk());
  uint8_t byte = 1;
  Status outside = (*writer)->append(&byte, 1);
  EXPECT_NE(outside.message().find("outside a segment"), std::string::npos);
  ASSERT_TRUE((*writer)->beginSegment().isOk());
  EXPECT_FALSE((*writer)->beginSegment().isOk());
  ASSERT_TRUE((*writer)->endSegment().isOk());

  // Metadata whose files list disagrees with the writer's.
  flatbuffers::FlatBufferBuilder fbb;
  auto config = fb::CreateModelConfigDirect(fbb, "glm_moe_dsa");
  fbb.Finish(fb::CreateArtifact(fbb, 0, 0, 0, config),
             fb::ArtifactIdentifier());
  Status finished = (*writer)->finish(fbb);
  EXPECT_NE(finished.message().find("Artifact.files has 0 entries"),
            std::string::npos)
      << finished.message();
}

TEST_F(ArtifactRoundTrip, ChecksumsCanBeSkipped) {
  ASSERT_TRUE(writeSample(file("model.kiln")).isOk());
  flipByte(file("model.kiln"), 4096 + 3); // inside weights[0]
  EXPECT_FALSE(Artifact::open(file("model.kiln")).isOk());
  OpenOptions options;
  options.verifyChecksums = false;
  auto artifact = Artifact::open(file("model.kiln"), options);
  EXPECT_TRUE(artifact.isOk()) << artifact.status().toString();
}

TEST_F(ArtifactRoundTrip, OpensRelativePathsAndReplacesAnOldArtifact) {
  ASSERT_TRUE(writeSample(file("model.kiln")).isOk());
  std::string firstId = formatArtifactId(
      (*Artifact::open(file("model.kiln")))->header().artifactId);
  ASSERT_TRUE(writeSample(file("model.kiln")).isOk());
  auto artifact = Artifact::open(file("model.kiln"));
  ASSERT_TRUE(artifact.isOk());
  EXPECT_NE(formatArtifactId((*artifact)->header().artifactId), firstId);

  auto cwd = std::filesystem::current_path();
  std::filesystem::current_path(dir_);
  SampleOptions split;
  split.maxFileBytes = 3 * 4096;
  ASSERT_TRUE(writeSample("rel.kiln", split).isOk());
  auto relative = Artifact::open("rel.kiln");
  std::filesystem::current_path(cwd);
  EXPECT_TRUE(relative.isOk()) << relative.status().toString();
}

} // namespace
