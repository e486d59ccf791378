//===- RopeTest.cpp - RoPE vs the GLM.md 3.6 formulas ---------------------===//
//
// The reference evaluates phi_i = pos * theta^(-2i/rotaryDim) in long double
// and applies the two pairings exactly as GLM.md writes them.
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"

using namespace kiln::cpu;
using namespace kiln::cpu::test;

namespace {

std::vector<float> ropeReference(const std::vector<float> &x, int64_t tokens,
                                 int64_t heads, int64_t dim,
                                 const std::vector<int32_t> &pos,
                                 RopeStyle style, float theta, int64_t offset,
                                 int64_t rotaryDim) {
  std::vector<float> out = x;
  const int64_t half = rotaryDim / 2;
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t h = 0; h < heads; ++h) {
      const float *in = x.data() + (t * heads + h) * dim + offset;
      float *o = out.data() + (t * heads + h) * dim + offset;
      for (int64_t i = 0; i < half; ++i) {
        long double phi =
            (long double)pos[t] *
            std::pow((long double)theta, -2.0L * i / (long double)rotaryDim);
        long double c = std::cos(phi), s = std::sin(phi);
        if (style == RopeStyle::Neox) {
          // out[i] = x[i]cos - x[i+half]sin; out[i+half] = x[i+half]cos +
          // x[i]sin
          o[i] = float(in[i] * c - in[i + half] * s);
          o[i + half] = float(in[i + half] * c + in[i] * s);
        } else {
          // out[2i] = x[2i]cos - x[2i+1]sin; out[2i+1] = x[2i+1]cos + x[2i]sin
          o[2 * i] = float(in[2 * i] * c - in[2 * i + 1] * s);
          o[2 * i + 1] = float(in[2 * i + 1] * c + in[2 * i] * s);
        }
      }
    }
  return out;
}

struct RopeCase {
  RopeStyle style;
  int64_t heads, dim, offset, rotaryDim;
  float theta;
};

void checkCase(const RopeCase &c) {
  std::mt19937 rng(7);
  const std::vector<int32_t> pos = {0, 1, 2, 17, 2047, 2048, 100000, 131071};
  const int64_t tokens = int64_t(pos.size());
  std::vector<float> x = randomVector(rng, tokens * c.heads * c.dim);
  std::vector<float> want = ropeReference(
      x, tokens, c.heads, c.dim, pos, c.style, c.theta, c.offset, c.rotaryDim);
  std::vector<float> got = x;
  rope(got.data(), tokens, c.heads, c.dim, pos.data(), c.style, c.theta,
       c.offset, c.rotaryDim);
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t h = 0; h < c.heads; ++h)
      for (int64_t i = 0; i < c.dim; ++i) {
        const int64_t k = (t * c.heads + h) * c.dim + i;
        const bool rotated = i >= c.offset && i < c.offset + c.rotaryDim;
        if (!rotated || pos[t] == 0) {
          EXPECT_EQ(got[k], x[k]) << "pos " << pos[t] << " dim " << i;
          continue;
        }
        // One float rounding of the result plus cos/sin in double.
        EXPECT_NEAR(got[k], want[k], 2e-6 * (1.0 + std::fabs(want[k])))
            << "pos " << pos[t] << " head " << h << " dim " << i;
      }
}

TEST(Rope, InterleavedMlaRopeTail) {
  // q [T, H, Dn + Dr] with q_pe last: offset Dn, rotary Dr (GLM-5 3.4).
  checkCase({RopeStyle::Interleaved, 3, 48, 32, 16, 1e6f});
}

TEST(Rope, InterleavedIndexerHead) {
  // Indexer q/k: first 64 of 128 rotated (GLM-5 3.5), GLM-5.2 theta.
  checkCase({RopeStyle::Interleaved, 2, 128, 0, 64, 8e6f});
}

TEST(Rope, NeoxPartialGlm4) {
  // GLM-4.x: NeoX on dims 0-63 of 128.
  checkCase({RopeStyle::Neox, 4, 128, 0, 64, 1e6f});
}

TEST(Rope, NeoxWithOffsetAndFullRotation) {
  checkCase({RopeStyle::Neox, 2, 40, 8, 32, 10000.0f});
  checkCase({RopeStyle::Interleaved, 1, 16, 0, 16, 10000.0f});
}

TEST(Rope, KnownAngles) {
  // pos 1, theta 100, rotaryDim 4: phi_0 = 1, phi_1 = 1/10.
  const int32_t pos = 1;
  float il[4] = {1.0f, 0.0f, 0.0f, 1.0f};
  rope(il, 1, 1, 4, &pos, RopeStyle::Interleaved, 100.0f, 0, 4);
  EXPECT_FLOAT_EQ(il[0], std::cos(1.0f));
  EXPECT_FLOAT_EQ(il[1], std::sin(1.0f));
  EXPECT_FLOAT_EQ(il[2], -std::sin(0.1f));
  EXPECT_FLOAT_EQ(il[3], std::cos(0.1f));
  float nx[4] = {1.0f, 0.0f, 0.0f, 1.0f}; // pairs (0, 2) and (1, 3)
  rope(nx, 1, 1, 4, &pos, RopeStyle::Neox, 100.0f, 0, 4);
  EXPECT_FLOAT_EQ(nx[0], std::cos(1.0f));
  EXPECT_FLOAT_EQ(nx[2], std::sin(1.0f));
  EXPECT_FLOAT_EQ(nx[1], -std::sin(0.1f));
  EXPECT_FLOAT_EQ(nx[3], std::cos(0.1f));
}

TEST(Rope, LargePositionKeepsPrecision) {
  // At pos 100000 the angle of pair 0 is 100000 rad; computing it in float
  // would be off by ~4e-3 rad. The rotation must match the long double
  // reference far more tightly than that.
  const int32_t pos = 100000;
  float x[2] = {1.0f, 0.0f};
  rope(x, 1, 1, 2, &pos, RopeStyle::Interleaved, 1e6f, 0, 2);
  EXPECT_NEAR(x[0], float(std::cos(100000.0L)), 1e-6);
  EXPECT_NEAR(x[1], float(std::sin(100000.0L)), 1e-6);
}

} // namespace
