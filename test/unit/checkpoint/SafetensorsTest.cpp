//===- SafetensorsTest.cpp - safetensors reader and writer ----------------===//

#include "frontends/glm/Safetensors.h"
#include "frontends/glm/SafetensorsWriter.h"

#include "TestUtil.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <random>

namespace kiln::glm {
namespace {

using testing::declBytes;
using testing::rawSafetensors;
using testing::readBytes;
using testing::TempDir;
using testing::writeBytes;
using testing::writeFilled;

// Parses an in-memory image (the fuzzer's entry point).
Result<SafetensorsHeader> parseImage(const std::string &bytes,
                                     const SafetensorsLimits &limits = {}) {
  return parseSafetensors(
      {reinterpret_cast<const uint8_t *>(bytes.data()), bytes.size()},
      "mem.safetensors", limits);
}

Result<SafetensorsHeader> parseRaw(const std::string &header,
                                   const std::string &data = "",
                                   const SafetensorsLimits &limits = {}) {
  return parseImage(rawSafetensors(header, data), limits);
}

TEST(SafetensorsWriter, StreamsChunksAndRoundTrips) {
  TempDir dir;
  std::string path = dir.file("a.safetensors");
  std::vector<TensorDecl> decls = {{"w", Dtype::BF16, {2, 3}},
                                   {"empty", Dtype::U8, {0}},
                                   {"scalar", Dtype::I64, {}},
                                   {"v", Dtype::F32, {4}}};
  auto writer = SafetensorsWriter::create(path, decls, {{"format", "pt"}});
  ASSERT_TRUE(writer.isOk()) << writer.status().toString();
  EXPECT_EQ(writer->nextTensor(), "w");
  std::string w(12, 'w');
  ASSERT_TRUE(writer->append(w.data(), 5).isOk()); // chunked
  ASSERT_TRUE(writer->append(w.data() + 5, 7).isOk());
  int64_t scalar = 42;
  ASSERT_TRUE(writer->writeTensor("scalar", &scalar, 8).isOk());
  float v[4] = {1, 2, 3, 4};
  ASSERT_TRUE(writer->writeTensor("v", v, sizeof(v)).isOk());
  ASSERT_TRUE(writer->finish().isOk());

  auto file = SafetensorsFile::open(path);
  ASSERT_TRUE(file.isOk()) << file.status().toString();
  EXPECT_EQ(file->headerBytes() % 8, 0u);
  EXPECT_EQ(file->metadata().at("format"), "pt");
  ASSERT_EQ(file->tensors().size(), 4u);
  EXPECT_EQ(file->tensors()[0].name, "empty"); // sorted by name
  const TensorInfo *t = file->find("w");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->dtype, Dtype::BF16);
  EXPECT_EQ(t->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(t->byteSize, 12u);
  EXPECT_EQ(t->file, path);
  EXPECT_EQ(t->fileOffset, 8 + file->headerBytes());
  EXPECT_EQ(std::memcmp(t->bytes().data, w.data(), 12), 0);
  const TensorInfo *s = file->find("scalar");
  ASSERT_NE(s, nullptr);
  EXPECT_TRUE(s->shape.empty());
  EXPECT_EQ(s->numElements(), 1u);
  int64_t got;
  std::memcpy(&got, s->data, 8);
  EXPECT_EQ(got, 42);
  EXPECT_EQ(file->find("empty")->byteSize, 0u);
  EXPECT_EQ(std::memcmp(file->find("v")->data, v, sizeof(v)), 0);
  EXPECT_EQ(file->find("absent"), nullptr);
  EXPECT_EQ(file->find("v")->describe(), "F32[4]");
}

TEST(SafetensorsWriter, RejectsMisuse) {
  TempDir dir;
  std::vector<TensorDecl> decls = {{"a", Dtype::F32, {2}},
                                   {"b", Dtype::F32, {1}}};
  auto writer = SafetensorsWriter::create(dir.file("x.safetensors"), decls);
  ASSERT_TRUE(writer.isOk());
  char buf[16] = {};
  EXPECT_ERROR_CONTAINS(writer->writeTensor("b", buf, 4),
                        "expected the next tensor to be 'a'");
  EXPECT_ERROR_CONTAINS(writer->append(buf, 12), "'a' has 8 bytes left");
  EXPECT_ERROR_CONTAINS(writer->writeTensor("a", buf, 4), "needs 8 bytes");
  ASSERT_TRUE(writer->writeTensor("a", buf, 8).isOk());
  EXPECT_ERROR_CONTAINS(writer->finish(), "before tensor 'b'");
  EXPECT_ERROR_CONTAINS(SafetensorsWriter::create(
                            dir.file("y.safetensors"),
                            {{"a", Dtype::F32, {1}}, {"a", Dtype::F32, {1}}}),
                        "duplicate");
}

TEST(Safetensors, RejectsFileTooSmall) {
  EXPECT_ERROR_CONTAINS(parseImage("abc"), "mem.safetensors", "at least 8");
}

TEST(Safetensors, RejectsHeaderLengthOverLimit) {
  std::string image = rawSafetensors("{}", "", int64_t(200) << 20);
  EXPECT_ERROR_CONTAINS(parseImage(image), "maxHeaderBytes", "209715200");
}

TEST(Safetensors, RejectsHeaderLengthPastEndOfFile) {
  std::string image = rawSafetensors("{}", "", 1000);
  auto r = parseImage(image);
  EXPECT_ERROR_CONTAINS(r, "header length 1000 runs past the end");
  EXPECT_EQ(r.status().code(), StatusCode::DataLoss);
}

TEST(Safetensors, RejectsTinyHeaderLength) {
  EXPECT_ERROR_CONTAINS(parseImage(rawSafetensors("{", "", 1)),
                        "header length 1 is too small");
}

TEST(Safetensors, RejectsMalformedJson) {
  EXPECT_ERROR_CONTAINS(parseRaw(R"({"a": {"dtype": "F32",)"),
                        "mem.safetensors", "not valid JSON");
  EXPECT_ERROR_CONTAINS(parseRaw("{\"a\xff\": 1}"), "not valid JSON");
  EXPECT_ERROR_CONTAINS(parseRaw("[1, 2]"), "must be a JSON object", "array");
}

TEST(Safetensors, RejectsDuplicateTensorNames) {
  std::string entry = R"({"dtype":"U8","shape":[1],"data_offsets":[0,1]})";
  EXPECT_ERROR_CONTAINS(
      parseRaw("{\"a\":" + entry + ",\"a\":" + entry + "}", "x"),
      "names 'a' more than once");
}

TEST(Safetensors, RejectsMissingEntryFields) {
  EXPECT_ERROR_CONTAINS(
      parseRaw(R"({"t":{"shape":[1],"data_offsets":[0,1]}})", "x"),
      "tensor 't'", "missing 'dtype'");
  EXPECT_ERROR_CONTAINS(
      parseRaw(R"({"t":{"dtype":"U8","data_offsets":[0,1]}})", "x"),
      "missing 'shape'");
  EXPECT_ERROR_CONTAINS(parseRaw(R"({"t":{"dtype":"U8","shape":[1]}})", "x"),
                        "missing 'data_offsets'");
  EXPECT_ERROR_CONTAINS(parseRaw(R"({"t":[1]})"), "entry must be an object");
}

TEST(Safetensors, RejectsWrongJsonTypes) {
  EXPECT_ERROR_CONTAINS(
      parseRaw(R"({"t":{"dtype":5,"shape":[1],"data_offsets":[0,1]}})", "x"),
      "'dtype' must be a string");
  EXPECT_ERROR_CONTAINS(
      parseRaw(R"({"t":{"dtype":"U8","shape":"1","data_offsets":[0,1]}})", "x"),
      "'shape' must be an array");
  EXPECT_ERROR_CONTAINS(
      parseRaw(R"({"t":{"dtype":"U8","shape":[1.0],"data_offsets":[0,1]}})",
               "x"),
      "shape[0] must be a non-negative integer", "number");
  EXPECT_ERROR_CONTAINS(
      parseRaw(R"({"t":{"dtype":"U8","shape":[-1],"data_offsets":[0,1]}})",
               "x"),
      "shape[0] must be a non-negative integer", "integer -1");
  EXPECT_ERROR_CONTAINS(
      parseRaw(R"({"t":{"dtype":"U8","shape":[1],"data_offsets":[0]}})", "x"),
      "'data_offsets' must be an array [begin, end]");
  EXPECT_ERROR_CONTAINS(
      parseRaw(R"({"t":{"dtype":"U8","shape":[1],"data_offsets":[0,"1"]}})",
               "x"),
      "data_offsets[1] must be a non-negative integer");
  EXPECT_ERROR_CONTAINS(parseRaw(R"({"__metadata__":{"format":1}})"),
                        "'__metadata__' entry 'format' must be a string");
}

TEST(Safetensors, RejectsUnknownDtype) {
  EXPECT_ERROR_CONTAINS(
      parseRaw(R"({"t":{"dtype":"F4","shape":[2],"data_offsets":[0,1]}})", "x"),
      "tensor 't'", "unknown dtype 'F4'");
}

TEST(Safetensors, RejectsRankAndDimLimits) {
  EXPECT_ERROR_CONTAINS(
      parseRaw(
          R"({"t":{"dtype":"U8","shape":[1,1,1,1,1,1,1,1,1],"data_offsets":[0,1]}})",
          "x"),
      "maxTensorRank (8): 9");
  EXPECT_ERROR_CONTAINS(
      parseRaw(
          R"({"t":{"dtype":"U8","shape":[1099511627777],"data_offsets":[0,1]}})",
          "x"),
      "maxDimSize (1099511627776): 1099511627777");
  EXPECT_ERROR_CONTAINS(
      parseRaw(
          R"({"t":{"dtype":"U8","shape":[1099511627776,1099511627776],"data_offsets":[0,1]}})",
          "x"),
      "overflows 64 bits");
  EXPECT_ERROR_CONTAINS(
      parseRaw(
          R"({"t":{"dtype":"F64","shape":[1099511627776,4194304],"data_offsets":[0,1]}})",
          "x"),
      "byte size", "overflows 64 bits");
}

TEST(Safetensors, RejectsCountAndNameLimits) {
  SafetensorsLimits limits;
  limits.maxTensorsPerFile = 1;
  std::string e = R"({"dtype":"U8","shape":[0],"data_offsets":[0,0]})";
  EXPECT_ERROR_CONTAINS(
      parseRaw("{\"a\":" + e + ",\"b\":" + e + "}", "", limits),
      "maxTensorsPerFile (1): 2");
  limits = {};
  limits.maxTensorNameBytes = 3;
  EXPECT_ERROR_CONTAINS(parseRaw("{\"abcd\":" + e + "}", "", limits),
                        "maxTensorNameBytes (3): 4");
}

TEST(Safetensors, RejectsByteSizeMismatch) {
  EXPECT_ERROR_CONTAINS(
      parseRaw(R"({"t":{"dtype":"BF16","shape":[2],"data_offsets":[0,3]}})",
               "xyz"),
      "tensor 't'", "BF16[2] needs 4 bytes but data_offsets [0, 3] span 3");
  EXPECT_ERROR_CONTAINS(
      parseRaw(R"({"t":{"dtype":"U8","shape":[2],"data_offsets":[3,1]}})",
               "xyz"),
      "end 1 is before begin 3");
}

TEST(Safetensors, RejectsOffsetsOutsideFile) {
  auto r = parseRaw(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
                    "abcd");
  EXPECT_ERROR_CONTAINS(r, "tensor 't'", "data_offsets [0, 8]",
                        "holds 4 bytes");
  EXPECT_EQ(r.status().code(), StatusCode::DataLoss);
}

TEST(Safetensors, RejectsTruncatedFile) {
  TempDir dir;
  std::string path = dir.file("t.safetensors");
  writeFilled(path, {{"a", Dtype::F32, {4}}, {"b", Dtype::BF16, {8}}});
  std::filesystem::resize_file(path, std::filesystem::file_size(path) - 1);
  auto r = SafetensorsFile::open(path);
  EXPECT_ERROR_CONTAINS(r, path.c_str(), "tensor 'b'", "truncated");
  EXPECT_EQ(r.status().code(), StatusCode::DataLoss);
}

TEST(Safetensors, RejectsOverlappingRanges) {
  EXPECT_ERROR_CONTAINS(
      parseRaw(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
               R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
               std::string(12, 'x')),
      "tensor 'b' bytes [4, 12) overlap tensor 'a' bytes [0, 8)");
  // Gaps and empty tensors are fine.
  auto ok =
      parseRaw(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
               R"("e":{"dtype":"F32","shape":[0],"data_offsets":[2,2]},)"
               R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
               std::string(12, 'x'));
  EXPECT_TRUE(ok.isOk()) << ok.status().toString();
}

TEST(Safetensors, OpenReportsMissingFile) {
  auto r = SafetensorsFile::open("/nonexistent/kiln/x.safetensors");
  EXPECT_ERROR_CONTAINS(r, "/nonexistent/kiln/x.safetensors", "cannot open");
  EXPECT_EQ(r.status().code(), StatusCode::NotFound);
}

// Random byte flips and truncations of a valid file must give a value or an
// error, never a crash (a smoke test; the libFuzzer harness goes further).
TEST(Safetensors, SurvivesMutations) {
  TempDir dir;
  std::string path = dir.file("m.safetensors");
  writeFilled(path, {{"a", Dtype::F32, {4}},
                     {"b", Dtype::BF16, {2, 8}},
                     {"c", Dtype::U8, {3}}});
  std::string good = readBytes(path);
  std::mt19937 rng(1234);
  int errors = 0;
  for (int i = 0; i < 2000; ++i) {
    std::string bad = good;
    int flips = 1 + rng() % 4;
    for (int f = 0; f < flips; ++f)
      bad[rng() % bad.size()] = static_cast<char>(rng());
    if (rng() % 4 == 0)
      bad.resize(rng() % bad.size());
    auto r = parseImage(bad);
    if (!r.isOk()) {
      ++errors;
      EXPECT_FALSE(r.status().message().empty());
    }
  }
  EXPECT_GT(errors, 0);
}

} // namespace
} // namespace kiln::glm
