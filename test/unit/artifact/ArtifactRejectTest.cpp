//===- ArtifactRejectTest.cpp - Every loader check, with its message ------===//
//
// Each test breaks one thing in an otherwise good artifact and checks that
// open() fails with a message naming the file and the field, and saying what
// was expected and found.
//
//===----------------------------------------------------------------------===//

#include "runtime/artifact/Artifact.h"
#include "runtime/artifact/ArtifactChecks.h"
#include "test/unit/Fixtures.h"
#include "test/unit/artifact/SampleArtifact.h"
#include "test/unit/artifact/TestFiles.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

using namespace kiln;
using namespace kiln::artifact;
using namespace kiln::artifact::test;

namespace {

class ArtifactReject : public TempDirTest {
protected:
  std::string path() const { return file("model.kiln"); }

  void write(const SampleOptions &options = {}) {
    Status status = writeSample(path(), options);
    ASSERT_TRUE(status.isOk()) << status.toString();
  }
  void writeSplit() {
    SampleOptions options;
    options.maxFileBytes = 3 * 4096;
    write(options);
  }

  /// open() fails with `code` and a message containing every piece.
  void expectRejected(const std::string &openPath, StatusCode code,
                      std::vector<std::string> pieces) {
    auto opened = Artifact::open(openPath);
    ASSERT_FALSE(opened.isOk()) << "expected a failure";
    const std::string &message = opened.status().message();
    EXPECT_EQ(opened.status().code(), code) << opened.status().toString();
    for (const std::string &piece : pieces)
      EXPECT_NE(message.find(piece), std::string::npos)
          << "missing \"" << piece << "\" in: " << message;
  }
  void expectRejected(StatusCode code, std::vector<std::string> pieces) {
    expectRejected(path(), code, std::move(pieces));
  }

  FileHeader header() const {
    FileHeader h;
    std::vector<uint8_t> bytes = readBytes(path());
    std::memcpy(&h, bytes.data(), sizeof(h));
    return h;
  }
};

TEST_F(ArtifactReject, TruncatedInsideTheHeader) {
  write();
  truncateTo(path(), 100);
  expectRejected(StatusCode::DataLoss,
                 {path(), "truncated: the file is 100 bytes, shorter than the "
                          "4096-byte header"});
  truncateTo(path(), 4); // "KILN": still a prefix of the magic
  expectRejected(StatusCode::DataLoss, {"truncated: the file is 4 bytes"});
}

TEST_F(ArtifactReject, TruncatedInsideTheSegments) {
  write();
  uint64_t size = std::filesystem::file_size(path());
  truncateTo(path(), 4096 + 100);
  expectRejected(StatusCode::DataLoss,
                 {path(), "truncated: the file is 4196 bytes, its header "
                          "records " +
                              std::to_string(size)});
}

TEST_F(ArtifactReject, TruncatedInsideTheMetadata) {
  write();
  uint64_t size = std::filesystem::file_size(path());
  truncateTo(path(), size - 10);
  expectRejected(StatusCode::DataLoss,
                 {"truncated: the file is " + std::to_string(size - 10) +
                  " bytes, its header records " + std::to_string(size)});
}

TEST_F(ArtifactReject, TruncatedSplitFile) {
  writeSplit();
  truncateTo(file("model.kiln.2"), 8000);
  expectRejected(StatusCode::DataLoss,
                 {"split file 2 'model.kiln.2'", file("model.kiln.2"),
                  "truncated: the file is 8000 bytes"});
}

TEST_F(ArtifactReject, TrailingBytes) {
  write();
  std::vector<uint8_t> bytes = readBytes(path());
  bytes.push_back(0);
  writeBytes(path(), bytes);
  expectRejected(StatusCode::DataLoss, {"unexpected trailing data"});
}

TEST_F(ArtifactReject, FlippedMetadataByte) {
  write();
  flipByte(path(), header().metadataOffset + 40);
  expectRejected(StatusCode::DataLoss,
                 {path(), "metadata CRC32C mismatch: stored 0x", "computed 0x",
                  "the metadata is corrupt"});
}

TEST_F(ArtifactReject, MetadataThatFailsTheVerifier) {
  write();
  // A root offset pointing past the end, with the CRCs made to match.
  std::vector<uint8_t> bytes = readBytes(path());
  uint64_t at = header().metadataOffset;
  uint32_t huge = 0x7ffffff0;
  std::memcpy(bytes.data() + at, &huge, 4);
  writeBytes(path(), bytes);
  resealHeader(path());
  expectRejected(StatusCode::InvalidArgument,
                 {path(), "fails FlatBuffers verification"});
}

TEST_F(ArtifactReject, WrongFileIdentifier) {
  write();
  std::vector<uint8_t> bytes = readBytes(path());
  std::memcpy(bytes.data() + header().metadataOffset + 4, "XXXX", 4);
  writeBytes(path(), bytes);
  resealHeader(path());
  expectRejected(StatusCode::InvalidArgument,
                 {"file identifier is 'XXXX', expected 'KILN'"});
}

TEST_F(ArtifactReject, FlippedWeightByteNamesTheWeight) {
  write();
  auto artifact = Artifact::open(path());
  ASSERT_TRUE(artifact.isOk());
  const fb::Extent &wq = *(*artifact)->meta()->weights()->Get(2)->data();
  uint64_t offset = wq.offset();
  artifact = Status(StatusCode::Internal, "closed");
  flipByte(path(), offset + 1234);
  expectRejected(StatusCode::DataLoss,
                 {path(), "weights[2] 'layers.0.attn.wq' data",
                  "CRC32C mismatch over bytes [" + std::to_string(offset),
                  "the file is corrupt"});
}

TEST_F(ArtifactReject, FlippedByteInASplitFileNamesThatFile) {
  writeSplit();
  flipByte(file("model.kiln.1"), 4096); // weights[1] scales
  expectRejected(StatusCode::DataLoss,
                 {file("model.kiln.1"),
                  "weights[1] 'layers.0.mlp.experts.{e}.w1' scales"});
}

TEST_F(ArtifactReject, FlippedHeaderByte) {
  write();
  flipByte(path(), 20); // inside the artifact id
  expectRejected(StatusCode::DataLoss,
                 {path(), "header CRC32C mismatch", "the header is corrupt"});
}

TEST_F(ArtifactReject, WrongFormatVersionIsReportedFirst) {
  write();
  std::vector<uint8_t> bytes = readBytes(path());
  uint32_t version = 7;
  std::memcpy(bytes.data() + 8, &version, 4);
  bytes[30] ^= 1; // also break the header CRC: the version still wins
  writeBytes(path(), bytes);
  expectRejected(StatusCode::FailedPrecondition,
                 {path() + ": format version 7, this runtime reads " +
                  std::to_string(FORMAT_VERSION) +
                  ": recompile with this kiln-compile"});
}

TEST_F(ArtifactReject, SafetensorsFile) {
  std::string st = kilnFixture("glm45-tiny-random/model.safetensors");
  if (!std::filesystem::exists(st))
    GTEST_SKIP() << st << " not present";
  expectRejected(st, StatusCode::InvalidArgument,
                 {st, "not a Kiln artifact: expected magic", "safetensors"});
}

TEST_F(ArtifactReject, RandomBytesEmptyFileAndFolder) {
  writeBytes(path(), sampleBytes(10000, 42));
  expectRejected(StatusCode::InvalidArgument,
                 {path(), "not a Kiln artifact: expected magic "
                          "\"KILNART\\x00\" at offset 0, found \""});
  writeBytes(path(), {});
  expectRejected(StatusCode::InvalidArgument,
                 {path(), "not a Kiln artifact: the file is empty"});
  expectRejected(dir_, StatusCode::InvalidArgument, {"not a regular file"});
  expectRejected(file("absent.kiln"), StatusCode::NotFound,
                 {file("absent.kiln"), "cannot open"});
}

TEST_F(ArtifactReject, MissingSplitFile) {
  writeSplit();
  std::filesystem::remove(file("model.kiln.1"));
  expectRejected(StatusCode::NotFound,
                 {path() + ": split file 1 'model.kiln.1'",
                  file("model.kiln.1") + ": cannot open"});
}

TEST_F(ArtifactReject, SplitFileFromAnotherArtifact) {
  writeSplit();
  SampleOptions options;
  options.maxFileBytes = 3 * 4096;
  ASSERT_TRUE(writeSample(file("other.kiln"), options).isOk());
  std::filesystem::copy_file(file("other.kiln.2"), file("model.kiln.2"),
                             std::filesystem::copy_options::overwrite_existing);
  expectRejected(StatusCode::InvalidArgument,
                 {"split file 2 'model.kiln.2'", "artifact id ", ", expected ",
                  "the file belongs to another artifact"});
}

TEST_F(ArtifactReject, SplitFilesSwapped) {
  writeSplit();
  std::filesystem::copy_file(file("model.kiln.3"), file("model.kiln.1"),
                             std::filesystem::copy_options::overwrite_existing);
  expectRejected(StatusCode::InvalidArgument,
                 {"split file 1 'model.kiln.1'", "file index 3, expected 1"});
}

TEST_F(ArtifactReject, OpeningASplitFileDirectly) {
  writeSplit();
  expectRejected(file("model.kiln.1"), StatusCode::InvalidArgument,
                 {"file index 1, expected 0", "open its file 0"});
}

TEST_F(ArtifactReject, ArgIndexOutOfRange) {
  SampleOptions options;
  options.moeWeightArg = 99;
  write(options);
  expectRejected(StatusCode::OutOfRange,
                 {path(), "plans[0] 'decode' dispatches[1] args[1]: Weight "
                          "index 99, expected < 3"});
}

TEST_F(ArtifactReject, KernelIndexOutOfRange) {
  SampleOptions options;
  options.moeKernel = 7;
  write(options);
  expectRejected(StatusCode::OutOfRange,
                 {path(), "plans[0] 'decode' dispatches[1]: kernel 7, "
                          "expected < 2"});
}

TEST_F(ArtifactReject, WeightSizeDisagreesWithShape) {
  SampleOptions options;
  options.embedShape = {16, 9};
  write(options);
  expectRejected(StatusCode::InvalidArgument,
                 {path(), "weights[0] 'embed.weight': data extent is 256 "
                          "bytes, expected 288 (Dense BF16, 144 elements)"});
}

TEST_F(ArtifactReject, BadShapes) {
  SampleOptions options;
  options.embedShape = {16, 0};
  write(options);
  expectRejected(StatusCode::InvalidArgument,
                 {"weights[0] 'embed.weight'", "shape [16, 0] has dim 1 = 0",
                  "expected 1 to"});
  options.embedShape = {int64_t(1) << 40, int64_t(1) << 40};
  write(options);
  expectRejected(StatusCode::InvalidArgument, {"more than"});
}

TEST_F(ArtifactReject, MissingScales) {
  SampleOptions options;
  options.writeMxfp4Scales = false;
  write(options);
  expectRejected(StatusCode::InvalidArgument,
                 {"weights[1] 'layers.0.mlp.experts.{e}.w1': scales missing, "
                  "layout Mxfp4 needs 32 bytes"});
}

TEST_F(ArtifactReject, DuplicatePlanName) {
  SampleOptions options;
  options.secondPlanName = "decode";
  write(options);
  expectRejected(StatusCode::InvalidArgument,
                 {"plans[1] 'decode': duplicate plan name"});
}

TEST_F(ArtifactReject, BadCache) {
  SampleOptions options;
  options.cacheWidth = 0;
  write(options);
  expectRejected(StatusCode::InvalidArgument,
                 {"caches[0] 'layers.0.latent': width 0, expected 1 to"});
  options.cacheWidth = 576;
  options.cacheDType = fb::DType::F8E4M3;
  write(options);
  expectRejected(StatusCode::InvalidArgument,
                 {"caches[0] 'layers.0.latent': dtype 3 (F8E4M3), expected "
                  "F32 or BF16"});
}

TEST_F(ArtifactReject, AddedTokenOutOfRange) {
  SampleOptions options;
  options.addedTokenId = 16;
  write(options);
  expectRejected(StatusCode::OutOfRange,
                 {"tokenizer.added_tokens[0] '<|user|>': id 16, expected 0 to "
                  "15"});
}

// GPU launches and weight copies are checked like everything else.
TEST_F(ArtifactReject, GpuLaunchesAndCopiesLoad) {
  SampleOptions options;
  options.gpu = true;
  options.launchArg = fb::GpuArg(fb::GpuArgPart::Scratch, 0);
  write(options);
  auto opened = Artifact::open(path());
  ASSERT_TRUE(opened.isOk()) << opened.status().toString();
  const fb::KernelSymbol &s =
      *opened.value()->meta()->kernels()->Get(0)->symbols()->Get(1);
  EXPECT_EQ(s.launches()->Get(0)->grid_div()->Get(1), 16);
}

TEST_F(ArtifactReject, GpuLaunchArgumentOfAnUnknownPart) {
  SampleOptions options;
  options.gpu = true;
  options.launchArg = fb::GpuArg(fb::GpuArgPart(10), 0);
  write(options);
  expectRejected(StatusCode::InvalidArgument,
                 {"kernels[0] 'embed' symbols[1] launches[0] args[2]: unknown "
                  "part 10"});
}

TEST_F(ArtifactReject, GpuLaunchWithZeroDivisor) {
  SampleOptions options;
  options.gpu = true;
  options.launchArg = fb::GpuArg(fb::GpuArgPart::Scratch, 0);
  options.gridDiv = 0;
  write(options);
  expectRejected(StatusCode::InvalidArgument,
                 {"kernels[0] 'embed' symbols[1] launches[0]: grid axis 1",
                  "div in [1, "});
}

TEST_F(ArtifactReject, GpuLaunchNamingAMissingScratch) {
  SampleOptions options;
  options.gpu = true; // launchArg names scratch 2 of 1
  write(options);
  expectRejected(StatusCode::InvalidArgument,
                 {"launches[0] args[2]: scratch 2, the symbol has 1"});
}

TEST_F(ArtifactReject, GpuCopyOfTheWrongSize) {
  SampleOptions options;
  options.gpu = true;
  options.launchArg = fb::GpuArg(fb::GpuArgPart::Scratch, 0);
  options.gpuCopyBytes = 1000;
  write(options);
  expectRejected(StatusCode::InvalidArgument,
                 {"weights[1] 'layers.0.mlp.experts.{e}.w1': GPU copy extents "
                  "are 1000 + 512 bytes, expected 2048 + 512 (Mxfp4Gpu)"});
}

TEST_F(ArtifactReject, GpuLaunchWorkgroupSize) {
  SampleOptions options;
  options.gpu = true;
  options.launchArg = fb::GpuArg(fb::GpuArgPart::Scratch, 0);
  options.launchWorkgroupSize = 2048;
  write(options);
  expectRejected(StatusCode::InvalidArgument,
                 {"launches[0]: workgroup_size 2048, expected 1 to 1024"});
}

TEST_F(ArtifactReject, GpuCopyWithTheWrongLayout) {
  SampleOptions options;
  options.gpu = true;
  options.launchArg = fb::GpuArg(fb::GpuArgPart::Scratch, 0);
  options.gpuLayout = fb::WeightLayout::Mxfp4;
  write(options);
  expectRejected(StatusCode::InvalidArgument,
                 {"a GPU copy needs an Mxfp4 weight with gpu_layout Mxfp4Gpu",
                  "gpu_layout Mxfp4"});
}

// A GPU-only artifact stores an MXFP4 matmul weight once, in the GPU
// layout: its segments have that layout's sizes, and it needs F4E2M1.
TEST(WeightBytes, GpuLayoutAloneHasTheGpuCopySizes) {
  const int64_t stack[] = {2, 8, 64}, odd[] = {8, 48};
  auto bytes = expectedWeightBytes(fb::WeightLayout::Mxfp4Gpu,
                                   fb::DType::F4E2M1, stack, 3, "w");
  ASSERT_TRUE(bytes.isOk()) << bytes.status().toString();
  WeightBytes gpu = mxfp4GpuBytes(stack, 3);
  EXPECT_EQ(bytes->data, gpu.data);
  EXPECT_EQ(bytes->scales, gpu.scales);
  EXPECT_EQ(bytes->data, uint64_t(2 * 1 * 1 * 64 * 16)); // as SampleOptions
  EXPECT_EQ(bytes->elements, uint64_t(2 * 8 * 64));
  auto bf16 = expectedWeightBytes(fb::WeightLayout::Mxfp4Gpu, fb::DType::BF16,
                                  stack, 3, "w");
  ASSERT_FALSE(bf16.isOk());
  EXPECT_NE(bf16.status().message().find("layout Mxfp4Gpu needs dtype F4E2M1"),
            std::string::npos)
      << bf16.status().message();
  auto k48 = expectedWeightBytes(fb::WeightLayout::Mxfp4Gpu, fb::DType::F4E2M1,
                                 odd, 2, "w");
  ASSERT_FALSE(k48.isOk());
  EXPECT_NE(k48.status().message().find("a multiple of 32"), std::string::npos)
      << k48.status().message();
}

TEST(WeightBytes, RowPanelsAreBF16MatricesOfWholePanels) {
  const int64_t ok[] = {3, 8, 64}, rows6[] = {6, 64}, cols48[] = {8, 48},
                vec[] = {64};
  auto bytes = expectedWeightBytes(fb::WeightLayout::DensePanel4,
                                   fb::DType::BF16, ok, 3, "w");
  ASSERT_TRUE(bytes.isOk()) << bytes.status().toString();
  EXPECT_EQ(bytes->data, uint64_t(3 * 8 * 64 * 2));
  EXPECT_EQ(bytes->scales, 0u);
  auto f32 = expectedWeightBytes(fb::WeightLayout::DensePanel4, fb::DType::F32,
                                 ok, 3, "w");
  ASSERT_FALSE(f32.isOk());
  EXPECT_NE(f32.status().message().find(
                "w: layout DensePanel4 needs dtype BF16, found F32"),
            std::string::npos)
      << f32.status().toString();
  auto mx = expectedWeightBytes(fb::WeightLayout::Mxfp4Panel4,
                                fb::DType::F4E2M1, ok, 3, "w");
  ASSERT_TRUE(mx.isOk()) << mx.status().toString();
  EXPECT_EQ(mx->data, uint64_t(3 * 8 * 64 / 2));
  EXPECT_EQ(mx->scales, uint64_t(3 * 8 * 64 / 32));
  auto mx6 = expectedWeightBytes(fb::WeightLayout::Mxfp4Panel4,
                                 fb::DType::F4E2M1, rows6, 2, "w");
  ASSERT_FALSE(mx6.isOk());
  EXPECT_NE(mx6.status().message().find(
                "layout Mxfp4Panel4 needs N a multiple of 4, found [6, 64]"),
            std::string::npos)
      << mx6.status().toString();
  for (auto [shape, rank] :
       {std::pair<const int64_t *, size_t>{rows6, 2}, {cols48, 2}, {vec, 1}}) {
    auto bad = expectedWeightBytes(fb::WeightLayout::DensePanel4,
                                   fb::DType::BF16, shape, rank, "w");
    ASSERT_FALSE(bad.isOk());
    EXPECT_NE(bad.status().message().find("N a multiple of 4 and K of 32"),
              std::string::npos)
        << bad.status().toString();
  }
}

} // namespace
