//===- Mxfp4QuantizeTest.cpp - MXFP4 encode/decode and error bounds -------===//

#include "passes/emit/Mxfp4Quantize.h"
#include "frontends/glm/Checkpoint.h"
#include "runtime/cpu/Dequant.h"
#include "test/unit/Fixtures.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

using namespace kiln;

namespace {

std::vector<float> decodeRow(const std::vector<uint8_t> &packed,
                             const std::vector<uint8_t> &scales, int64_t k) {
  std::vector<float> out(k);
  for (int64_t i = 0; i < k; ++i) {
    uint8_t byte = packed[i / 2];
    uint8_t code = (i % 2) ? byte >> 4 : byte & 0xF;
    out[i] = cpu::e2m1ToFloat(code) * cpu::e8m0ToFloat(scales[i / 32]);
  }
  return out;
}

bool sameBits(float a, float b) {
  uint32_t x, y;
  std::memcpy(&x, &a, 4);
  std::memcpy(&y, &b, 4);
  return x == y;
}

} // namespace

// Decoding is exact for every (code, scale) pair: e2m1 * 2^(s - 127).
TEST(Mxfp4, DecodeAllCodesAllScales) {
  static const double kMag[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
  for (int s = 0; s < 255; ++s)
    for (int c = 0; c < 16; ++c) {
      double expected =
          (c & 8 ? -1 : 1) * kMag[c & 7] * std::ldexp(1.0, s - 127);
      float got = cpu::e2m1ToFloat(uint8_t(c)) * cpu::e8m0ToFloat(uint8_t(s));
      if (std::isinf(expected) || std::fabs(expected) > 3.4028234e38)
        EXPECT_TRUE(std::isinf(got)) << "code " << c << " scale " << s;
      else
        EXPECT_EQ(double(got), expected) << "code " << c << " scale " << s;
    }
  EXPECT_TRUE(std::isnan(cpu::e8m0ToFloat(0xFF)));
}

// Every representable block round-trips bit for bit: a block holding all 16
// codes times 2^k (with 6 * 2^k as its maximum) gets scale byte k + 127 and
// decodes to exactly its input, for every k whose values are finite floats.
TEST(Mxfp4, EncodeDecodeExactOnAllCodesAllFiniteScales) {
  for (auto rule : {Mxfp4ScaleRule::Even, Mxfp4ScaleRule::Floor}) {
    for (int s = 0; s <= 252; ++s) {
      std::vector<float> row(32);
      for (int i = 0; i < 32; ++i)
        row[i] = cpu::e2m1ToFloat(uint8_t(i % 16)) * std::ldexp(1.0f, s - 127);
      row[31] = 6.0f * std::ldexp(1.0f, s - 127);
      std::vector<uint8_t> packed(16), scales(1);
      quantizeMxfp4Row(row.data(), 32, rule, packed.data(), scales.data());
      ASSERT_EQ(scales[0], s) << "scale " << s;
      std::vector<float> back = decodeRow(packed, scales, 32);
      for (int i = 0; i < 32; ++i) {
        // -0 is stored as +0 (Quark writes no negative zero).
        if (row[i] == 0.0f)
          EXPECT_EQ(back[i], 0.0f);
        else
          EXPECT_TRUE(sameBits(back[i], row[i]))
              << "scale " << s << " element " << i << ": " << row[i] << " -> "
              << back[i];
      }
    }
  }
}

TEST(Mxfp4, ElementRoundingIsNearestEven) {
  EXPECT_EQ(e2m1Encode(0.25f), 0);  // tie between 0 and 0.5 -> 0
  EXPECT_EQ(e2m1Encode(0.75f), 2);  // tie between 0.5 and 1 -> 1
  EXPECT_EQ(e2m1Encode(1.25f), 2);  // tie between 1 and 1.5 -> 1
  EXPECT_EQ(e2m1Encode(1.75f), 4);  // tie between 1.5 and 2 -> 2
  EXPECT_EQ(e2m1Encode(2.5f), 4);   // tie between 2 and 3 -> 2
  EXPECT_EQ(e2m1Encode(3.5f), 6);   // tie between 3 and 4 -> 4
  EXPECT_EQ(e2m1Encode(5.0f), 6);   // tie between 4 and 6 -> 4
  EXPECT_EQ(e2m1Encode(100.0f), 7); // saturates at 6
  EXPECT_EQ(e2m1Encode(-2.9f), 8 | 5);
  EXPECT_EQ(e2m1Encode(-0.1f), 0); // no negative zero
}

TEST(Mxfp4, ScaleRules) {
  // AMDGPU.md section 1: exponents for amax 1.74 / 1.76 / 7.
  auto exp = [](float amax, Mxfp4ScaleRule r) {
    return int(mxfp4ScaleByte(amax, r)) - 127;
  };
  EXPECT_EQ(exp(1.74f, Mxfp4ScaleRule::Floor), -2);
  EXPECT_EQ(exp(1.76f, Mxfp4ScaleRule::Floor), -2);
  EXPECT_EQ(exp(7.0f, Mxfp4ScaleRule::Floor), 0);
  EXPECT_EQ(exp(1.74f, Mxfp4ScaleRule::Even), -2);
  EXPECT_EQ(exp(1.76f, Mxfp4ScaleRule::Even), -1);
  EXPECT_EQ(exp(7.0f, Mxfp4ScaleRule::Even), 1);
  EXPECT_EQ(mxfp4ScaleByte(0.0f, Mxfp4ScaleRule::Even), 0);
  EXPECT_EQ(mxfp4ScaleByte(NAN, Mxfp4ScaleRule::Even), 0xFF);
  EXPECT_EQ(mxfp4ScaleByte(1e-45f, Mxfp4ScaleRule::Even), 0); // clamped
}

// Per-element error stays within the format's bound: half the E2M1 spacing
// at the element's magnitude, times the scale; beyond 6 (only reachable
// under the floor rule, which clips) the error is the clipped amount.
TEST(Mxfp4, QuantizationErrorWithinFormatBound) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-20, 20);
  for (auto rule : {Mxfp4ScaleRule::Even, Mxfp4ScaleRule::Floor}) {
    double sumSq = 0, sumErrSq = 0;
    for (int block = 0; block < 4000; ++block) {
      std::vector<float> row(32);
      float mag = std::ldexp(1.0f, exponent(rng));
      for (float &x : row)
        x = normal(rng) * mag;
      std::vector<uint8_t> packed(16), scales(1);
      quantizeMxfp4Row(row.data(), 32, rule, packed.data(), scales.data());
      std::vector<float> back = decodeRow(packed, scales, 32);
      float scale = cpu::e8m0ToFloat(scales[0]);
      for (int i = 0; i < 32; ++i) {
        float a = std::fabs(row[i]) / scale;
        float spacing = a < 2 ? 0.5f : a < 4 ? 1.0f : 2.0f;
        float bound = std::max(spacing / 2, a - 6.0f) * scale;
        EXPECT_LE(std::fabs(row[i] - back[i]), bound * (1 + 1e-6f))
            << "block " << block << " element " << i;
        if (rule == Mxfp4ScaleRule::Even)
          EXPECT_LT(a, 8.0f);
        sumSq += double(row[i]) * row[i];
        sumErrSq += double(row[i] - back[i]) * (row[i] - back[i]);
      }
    }
    // AMDGPU.md: relative RMS error on N(0,1) is about 0.11 for both rules.
    EXPECT_LT(std::sqrt(sumErrSq / sumSq), 0.13);
  }
}

// Kiln's quantization of the BF16 fixture reproduces the Quark-form fixture
// byte for byte (same rule: even scales, nearest-even elements).
TEST(Mxfp4, MatchesQuarkFixtureBytes) {
  auto bf16 = glm::Checkpoint::open(kilnFixturesDir() + "/glm5-tiny-dev");
  auto quark =
      glm::Checkpoint::open(kilnFixturesDir() + "/glm5-tiny-dev-mxfp4");
  ASSERT_TRUE(bf16.isOk()) << bf16.status().toString();
  ASSERT_TRUE(quark.isOk()) << quark.status().toString();
  int compared = 0;
  for (const std::string &name : quark->names()) {
    const glm::TensorInfo *q = quark->find(name);
    if (q->dtype != Dtype::U8 || name.size() < 7 ||
        name.substr(name.size() - 7) != ".weight")
      continue;
    const glm::TensorInfo *src = bf16->find(name);
    const glm::TensorInfo *qs = quark->find(name + "_scale");
    ASSERT_NE(src, nullptr) << name;
    ASSERT_NE(qs, nullptr) << name;
    int64_t n = src->shape[0], k = src->shape[1];
    std::vector<float> row(k);
    std::vector<uint8_t> packed(k / 2), scales(k / 32);
    for (int64_t r = 0; r < n; ++r) {
      const uint16_t *s = reinterpret_cast<const uint16_t *>(src->data) + r * k;
      for (int64_t c = 0; c < k; ++c)
        row[c] = cpu::bf16ToFloat(s[c]);
      quantizeMxfp4Row(row.data(), k, Mxfp4ScaleRule::Even, packed.data(),
                       scales.data());
      ASSERT_EQ(0, std::memcmp(packed.data(), q->data + r * (k / 2), k / 2))
          << name << " row " << r;
      ASSERT_EQ(0, std::memcmp(scales.data(), qs->data + r * (k / 32), k / 32))
          << name << " row " << r;
    }
    ++compared;
  }
  EXPECT_EQ(compared, 153); // routed + shared experts of layers 1-3
}
