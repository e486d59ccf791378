//===- ArtifactCorruptionTest.cpp - No damaged file crashes the loader ----===//
//
// Systematic damage: every metadata byte changed with the CRCs made to match
// (so the FlatBuffers verifier and the semantic walk see it), every header
// byte changed, and truncation at many sizes. open() must return, never
// crash; run under the sanitizer build this also proves no out-of-bounds
// read. Whatever still loads is rendered by kiln-dump's JSON code too.
//
//===----------------------------------------------------------------------===//

#include "runtime/artifact/Artifact.h"
#include "test/unit/artifact/SampleArtifact.h"
#include "test/unit/artifact/TestFiles.h"
#include "tools/kiln-dump/ArtifactJson.h"

#include <gtest/gtest.h>

#include <cstring>
#include <iostream>

using namespace kiln;
using namespace kiln::artifact;
using namespace kiln::artifact::test;

namespace {

class ArtifactCorruption : public TempDirTest {
protected:
  void SetUp() override {
    TempDirTest::SetUp();
    SampleOptions options;
    options.maxFileBytes = 3 * 4096;
    ASSERT_TRUE(writeSample(path(), options).isOk());
    original_ = readBytes(path());
    std::memcpy(&header_, original_.data(), sizeof(header_));
  }
  std::string path() const { return file("model.kiln"); }

  // Opens the damaged file; a failure must name the file it is about, and
  // whatever loads must also render through kiln-dump.
  bool opensDamaged(const std::string &what) {
    auto opened = Artifact::open(path());
    if (!opened.isOk()) {
      EXPECT_NE(opened.status().message().find(dir_), std::string::npos)
          << what << ": " << opened.status().message();
      return false;
    }
    dump::DumpOptions options;
    options.weights = options.plans = true;
    auto json = dump::dumpArtifact(**opened, options);
    EXPECT_TRUE(json.isOk()) << what << ": " << json.status().toString();
    if (json.isOk())
      json->dump(-1, ' ', false,
                 nlohmann::ordered_json::error_handler_t::replace);
    return true;
  }

  std::vector<uint8_t> original_;
  FileHeader header_;
};

TEST_F(ArtifactCorruption, EveryMetadataByte) {
  int rejected = 0, total = 0;
  std::vector<uint8_t> bytes = original_;
  for (uint64_t i = 0; i < header_.metadataSize; ++i)
    for (int mask : {0x01, 0x80, 0xff}) {
      uint64_t at = header_.metadataOffset + i;
      bytes[at] ^= static_cast<uint8_t>(mask);
      resealHeader(bytes);
      patchBytes(path(), 0, {bytes.begin(), bytes.begin() + HEADER_SIZE});
      patchBytes(path(), at, {bytes[at]});
      ++total;
      rejected += !opensDamaged("metadata byte " + std::to_string(i));
      bytes[at] ^= static_cast<uint8_t>(mask);
      patchBytes(path(), at, {bytes[at]});
    }
  // Most changes are caught; the rest (string contents, padding, flags)
  // still describe a consistent artifact.
  EXPECT_GT(rejected, total / 2) << rejected << " of " << total;
  std::cout << "[ info     ] " << rejected << " of " << total
            << " metadata changes rejected\n";
}

TEST_F(ArtifactCorruption, EveryHeaderByte) {
  for (size_t i = 0; i < 128; ++i) {
    std::vector<uint8_t> bytes = original_;
    bytes[i] ^= 0x10;
    writeBytes(path(), bytes);
    EXPECT_FALSE(opensDamaged("header byte " + std::to_string(i)));
  }
}

TEST_F(ArtifactCorruption, TruncatedAnywhere) {
  for (uint64_t size = 0; size < original_.size(); size += 61) {
    writeBytes(path(), std::vector<uint8_t>(original_.begin(),
                                            original_.begin() + size));
    EXPECT_FALSE(opensDamaged("cut at " + std::to_string(size)));
  }
}

} // namespace
