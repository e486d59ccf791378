//===- MxWeightShuffleTest.cpp - The GPU MXFP4 weight layout --------------===//

#include "passes/codegen/rocdl/MxWeightShuffle.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

using namespace kiln::rocdl;

namespace {

void randomBytes(std::vector<uint8_t> &v, uint32_t seed) {
  std::mt19937 rng(seed);
  for (uint8_t &b : v)
    b = uint8_t(rng());
}

TEST(MxWeightShuffle, RoundTripsAndPads) {
  const int64_t shapes[][2] = {{16, 128}, {40, 96}, {3, 32}, {64, 1152}};
  uint32_t seed = 1;
  for (auto [n, k] : shapes) {
    std::vector<uint8_t> packed(size_t(n * k / 2)), scales(size_t(n * k / 32));
    randomBytes(packed, seed++);
    randomBytes(scales, seed++);
    ShuffledMxWeight s;
    std::string error;
    ASSERT_TRUE(
        shuffleMxfp4Weight(packed.data(), scales.data(), n, k, s, error))
        << error;
    EXPECT_EQ(int64_t(s.data.size()), ceilDiv(n, 16) * ceilDiv(k, 128) * 1024);
    EXPECT_EQ(int64_t(s.scales.size()),
              ceilDiv(n, 16) * ceilDiv(ceilDiv(k, 128), 4) * 256);
    std::vector<uint8_t> p2, s2;
    unshuffleMxfp4Weight(s, p2, s2);
    EXPECT_EQ(p2, packed) << n << "x" << k;
    EXPECT_EQ(s2, scales) << n << "x" << k;
    // Padding: zero codes with scale 1.0.
    size_t zeros = std::count(s.data.begin(), s.data.end(), 0);
    EXPECT_GE(int64_t(zeros), int64_t(s.data.size()) - int64_t(packed.size()));
  }
}

TEST(MxWeightShuffle, DataIsAiterShuffleWeight16x16) {
  // aiter.ops.shuffle.shuffle_weight(x, layout=(16, 16)) for FP4 bytes
  // [N, Kb]: view (N/16, 16, Kb/32, 2, 16), permute (0, 2, 3, 1, 4).
  const int64_t n = 48, k = 512, kb = k / 2;
  std::vector<uint8_t> packed(size_t(n * kb)), scales(size_t(n * k / 32), 127);
  randomBytes(packed, 9);
  ShuffledMxWeight s;
  std::string error;
  ASSERT_TRUE(shuffleMxfp4Weight(packed.data(), scales.data(), n, k, s, error));
  std::vector<uint8_t> aiter(packed.size());
  size_t out = 0;
  for (int64_t n1 = 0; n1 < n / 16; ++n1)
    for (int64_t k2 = 0; k2 < kb / 32; ++k2)
      for (int64_t k1 = 0; k1 < 2; ++k1)
        for (int64_t n0 = 0; n0 < 16; ++n0)
          for (int64_t k0 = 0; k0 < 16; ++k0)
            aiter[out++] =
                packed[size_t((n1 * 16 + n0) * kb + k2 * 32 + k1 * 16 + k0)];
  EXPECT_EQ(s.data, aiter);
}

TEST(MxWeightShuffle, ScaleWordsFeedOpSel) {
  // Byte j of lane l's word w is the scale of row l % 16, block
  // 4 * (4 * w + j) + l / 16.
  const int64_t n = 16, k = 1024;
  std::vector<uint8_t> packed(size_t(n * k / 2)), scales(size_t(n * k / 32));
  for (size_t i = 0; i < scales.size(); ++i)
    scales[i] = uint8_t(i);
  ShuffledMxWeight s;
  std::string error;
  ASSERT_TRUE(shuffleMxfp4Weight(packed.data(), scales.data(), n, k, s, error));
  for (int64_t w = 0; w < 2; ++w)
    for (int64_t lane = 0; lane < 64; ++lane)
      for (int64_t j = 0; j < 4; ++j) {
        int64_t block = 4 * (4 * w + j) + lane / 16;
        EXPECT_EQ(s.scales[size_t((w * 64 + lane) * 4 + j)],
                  scales[size_t((lane % 16) * (k / 32) + block)]);
      }
}

TEST(MxWeightShuffle, RejectsBadShapes) {
  std::vector<uint8_t> bytes(64);
  ShuffledMxWeight s;
  std::string error;
  EXPECT_FALSE(shuffleMxfp4Weight(bytes.data(), bytes.data(), 4, 48, s, error));
  EXPECT_EQ(error, "MXFP4 weight must be [N, K] with N > 0 and K a positive "
                   "multiple of 32, got [4, 48]");
  EXPECT_FALSE(shuffleMxfp4Weight(bytes.data(), bytes.data(), 0, 32, s, error));
}

} // namespace
