//===- NpyTest.cpp - .npy reader and writer -------------------------------===//

#include "runtime/support/Npy.h"
#include "test/unit/Fixtures.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <random>
#include <unistd.h>

using namespace kiln;

namespace {

std::string tempPath(const std::string &name) {
  const char *dir = std::getenv("TMPDIR");
  return std::string(dir && *dir ? dir : "/tmp") + "/kiln-npy-" +
         std::to_string(::getpid()) + "-" + name;
}

/// A .npy file assembled by hand: preamble + header text + data bytes.
std::vector<uint8_t> rawNpy(const std::string &header, size_t dataBytes,
                            uint8_t major = 1) {
  std::vector<uint8_t> out = {0x93, 'N', 'U', 'M', 'P', 'Y', major, 0};
  size_t len = header.size();
  out.push_back(static_cast<uint8_t>(len & 0xff));
  out.push_back(static_cast<uint8_t>(len >> 8));
  if (major >= 2) {
    out.push_back(static_cast<uint8_t>(len >> 16));
    out.push_back(static_cast<uint8_t>(len >> 24));
  }
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), dataBytes, 0);
  return out;
}

Status parseStatus(const std::vector<uint8_t> &bytes) {
  Result<NpyArray> a = parseNpy(bytes.data(), bytes.size(), "t.npy");
  return a.isOk() ? Status::ok() : a.status();
}

void expectError(const std::vector<uint8_t> &bytes, const char *needle) {
  Status s = parseStatus(bytes);
  ASSERT_FALSE(s.isOk()) << "accepted, expected an error with " << needle;
  EXPECT_NE(s.message().find("t.npy"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find(needle), std::string::npos)
      << "'" << s.message() << "' lacks '" << needle << "'";
}

TEST(Npy, RoundTripF32) {
  std::string path = tempPath("f32.npy");
  std::vector<float> data = {1.5f, -2.0f, 3.25f, 0.0f, 1e30f, -1e-30f};
  ASSERT_TRUE(writeNpyF32(path, {2, 3}, data).isOk());
  Result<NpyArray> a = readNpy(path);
  ASSERT_TRUE(a.isOk()) << a.status().toString();
  EXPECT_EQ(a->dtype, NpyDType::F32);
  EXPECT_EQ(a->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(*a->toVector<float>(), data);
  EXPECT_FALSE(a->toVector<double>().isOk());
  // The data starts 64-byte aligned, as NumPy writes it.
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  EXPECT_EQ((static_cast<size_t>(in.tellg()) - data.size() * 4) % 64, 0u);
  std::remove(path.c_str());
}

TEST(Npy, RoundTripAllDTypesAndShapes) {
  const NpyDType all[] = {NpyDType::F16, NpyDType::F32, NpyDType::F64,
                          NpyDType::I8,  NpyDType::I16, NpyDType::I32,
                          NpyDType::I64, NpyDType::U8,  NpyDType::U16,
                          NpyDType::U32, NpyDType::U64, NpyDType::Bool};
  const std::vector<std::vector<int64_t>> shapes = {
      {}, {0}, {7}, {2, 3}, {1, 2, 3, 4}, {5, 0, 2}};
  for (NpyDType dtype : all)
    for (const auto &shape : shapes) {
      size_t count = 1;
      for (int64_t d : shape)
        count *= static_cast<size_t>(d);
      std::vector<uint8_t> data(count * npyDTypeSize(dtype));
      for (size_t i = 0; i < data.size(); ++i)
        data[i] = static_cast<uint8_t>(i * 37 + 1);
      Result<std::vector<uint8_t>> bytes =
          serializeNpy(dtype, shape, data.data(), data.size());
      ASSERT_TRUE(bytes.isOk()) << bytes.status().toString();
      Result<NpyArray> a = parseNpy(bytes->data(), bytes->size(), "mem");
      ASSERT_TRUE(a.isOk()) << a.status().toString();
      EXPECT_EQ(a->dtype, dtype);
      EXPECT_EQ(a->shape, shape);
      EXPECT_EQ(a->data, data);
      EXPECT_EQ(a->numElements(), count);
    }
}

TEST(Npy, GenericWriterAndI32) {
  std::string path = tempPath("i32.npy");
  std::vector<int32_t> ids = {1, -2, 2147483647, -2147483647 - 1};
  ASSERT_TRUE(writeNpyI32(path, {4}, ids).isOk());
  Result<NpyArray> a = readNpy(path);
  ASSERT_TRUE(a.isOk());
  EXPECT_EQ(*a->toVector<int32_t>(), ids);
  ASSERT_TRUE(writeNpy(path, *a).isOk());
  EXPECT_EQ(readNpy(path)->data, a->data);
  std::remove(path.c_str());
}

TEST(Npy, WriterRejectsMismatchedData) {
  std::vector<float> data(5);
  Status s = writeNpyF32(tempPath("bad.npy"), {2, 3}, data);
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("needs 24 data bytes, given 20"),
            std::string::npos)
      << s.message();
  EXPECT_FALSE(writeNpyF32("/nonexistent-dir/x.npy", {5}, data).isOk());
  EXPECT_FALSE(serializeNpy(NpyDType::F32, {-1}, nullptr, 0).isOk());
}

TEST(Npy, ReadsNumPyHeaders) {
  // Headers in the forms NumPy has written over the years.
  EXPECT_TRUE(parseStatus(rawNpy("{'descr': '<i8', 'fortran_order': False, "
                                 "'shape': (2,), }          \n",
                                 16))
                  .isOk());
  EXPECT_TRUE(parseStatus(rawNpy("{'descr':'<f2','fortran_order':False,"
                                 "'shape':(3L, 1L)}\n",
                                 6))
                  .isOk());
  EXPECT_TRUE(parseStatus(rawNpy("{\"shape\": (), \"fortran_order\": False, "
                                 "\"descr\": \"|u1\"}\n",
                                 1, 2))
                  .isOk());
  EXPECT_TRUE(parseStatus(rawNpy("{'descr': '<u1', 'fortran_order': False, "
                                 "'shape': (4,), }\n",
                                 4, 3))
                  .isOk());
}

TEST(Npy, RejectsBadFiles) {
  const std::string ok = "{'descr': '<f4', 'fortran_order': False, "
                         "'shape': (2, 3), }\n";
  expectError({}, "not a .npy file");
  expectError({'P', 'K', 3, 4, 0, 0, 0, 0, 0, 0, 0}, "not a .npy file");
  expectError(rawNpy(ok, 24, 4), "unsupported .npy version 4");
  expectError(rawNpy(ok, 20), "needs 24 data bytes, found 20");
  expectError(rawNpy(ok, 28), "needs 24 data bytes, found 28");
  expectError(rawNpy("{'descr': '<f4', 'fortran_order': True, "
                     "'shape': (2, 3), }\n",
                     24),
              "fortran_order");
  expectError(rawNpy("{'descr': '>f4', 'fortran_order': False, "
                     "'shape': (2,), }\n",
                     8),
              "big-endian");
  expectError(rawNpy("{'descr': '<c8', 'fortran_order': False, "
                     "'shape': (2,), }\n",
                     16),
              "unsupported npy descr '<c8'");
  expectError(rawNpy("{'descr': '|f4', 'fortran_order': False, "
                     "'shape': (2,), }\n",
                     8),
              "no byte order");
  expectError(rawNpy("{'descr': [('a', '<f4')], 'fortran_order': False, "
                     "'shape': (2,), }\n",
                     8),
              "structured");
  expectError(rawNpy("{'descr': '<f4', 'shape': (2,), }\n", 8),
              "missing key 'fortran_order'");
  expectError(rawNpy("{'descr': '<f4', 'fortran_order': False, "
                     "'shape': (2,), 'extra': 1}\n",
                     8),
              "unexpected key 'extra'");
  expectError(rawNpy("{'descr': '<f4', 'fortran_order': False, "
                     "'shape': (-2,), }\n",
                     8),
              "shape");
  expectError(rawNpy("{'descr': '<f4', 'fortran_order': False, "
                     "'shape': (99999999999999999999,), }\n",
                     8),
              "overflows int64");
  expectError(rawNpy("{'descr': '<f4', 'fortran_order': False, "
                     "'shape': (4294967296, 4294967296, 4294967296), }\n",
                     8),
              "overflows");
  expectError(rawNpy("{'descr': '<f4', 'fortran_order': False, "
                     "'shape': (2,)\n",
                     8),
              "expected ',' or '}'");
  expectError(rawNpy("{'descr': '<f4", 0), "unterminated string");
  // A header length that runs past the end of the file.
  std::vector<uint8_t> truncated = rawNpy(ok, 0);
  truncated.resize(30);
  expectError(truncated, "exceeds the file");
}

TEST(Npy, MutatedFilesNeverCrash) {
  std::vector<float> data(12, 1.0f);
  Result<std::vector<uint8_t>> good =
      serializeNpy(NpyDType::F32, {3, 4}, data.data(), data.size() * 4);
  ASSERT_TRUE(good.isOk());
  std::mt19937 rng(7);
  for (int iter = 0; iter < 3000; ++iter) {
    std::vector<uint8_t> bytes = *good;
    int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      size_t at = rng() % 80; // mostly the preamble and header
      bytes[at] = static_cast<uint8_t>(rng());
    }
    if (rng() % 4 == 0)
      bytes.resize(rng() % bytes.size());
    Result<NpyArray> a = parseNpy(bytes.data(), bytes.size(), "fuzz");
    if (a.isOk()) {
      EXPECT_EQ(a->data.size(), a->numElements() * npyDTypeSize(a->dtype));
    } else {
      EXPECT_FALSE(a.status().message().empty());
    }
  }
}

TEST(Npy, MissingFile) {
  Result<NpyArray> a = readNpy("/nonexistent/x.npy");
  ASSERT_FALSE(a.isOk());
  EXPECT_EQ(a.status().code(), StatusCode::NotFound);
  EXPECT_NE(a.status().message().find("/nonexistent/x.npy"), std::string::npos);
}

TEST(Npy, ReadsGoldenFixtures) {
  Result<NpyArray> tokens =
      readNpy(kilnFixture("glm5-tiny-dev/golden/eval_tokens.npy"));
  ASSERT_TRUE(tokens.isOk()) << tokens.status().toString();
  EXPECT_EQ(tokens->dtype, NpyDType::I32);
  ASSERT_EQ(tokens->shape.size(), 1u);
  EXPECT_EQ(tokens->shape[0], 8192);
  Result<NpyArray> logits =
      readNpy(kilnFixture("glm5-tiny-dev/golden/last_logits.npy"));
  ASSERT_TRUE(logits.isOk()) << logits.status().toString();
  EXPECT_EQ(logits->dtype, NpyDType::F32);
  EXPECT_EQ(logits->shape, (std::vector<int64_t>{5, 2048}));
}

} // namespace
