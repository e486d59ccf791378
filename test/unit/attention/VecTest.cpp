//===- VecTest.cpp - The shared dot-product loops, bit for bit ------------===//
//
// vec::sum16 folds 16 lane sums together; each must be sum()'s bits (the
// same additions in the same order), and a 4 x 4 dot tile, which uses it,
// must give every dot the bits of the same dot computed alone. Inputs mix
// magnitudes and signs so a different order of additions would round
// differently.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/attention/Vec.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

using namespace kiln::cpu::vec;

namespace {

/// Values spread over 1e-30 .. 1e30, both signs, some exact cancellations.
float wild(std::mt19937 &rng) {
  std::uniform_real_distribution<float> mant(-1.0f, 1.0f);
  std::uniform_int_distribution<int> exp(-100, 100);
  return std::ldexp(mant(rng), exp(rng));
}

uint32_t bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

TEST(Vec, Sum16MakesSumsAdditions) {
  std::mt19937 rng(7);
  for (int round = 0; round < 200; ++round) {
    F16x v[16];
    for (auto &x : v)
      for (int l = 0; l < 16; ++l)
        x[l] = round % 3 == 0 ? wild(rng)
                              : float(int(rng() % 2001) - 1000) *
                                    (1.0f + 1e-7f * float(l));
    float lanes[16];
    store(lanes, sum16(v));
    for (int k = 0; k < 16; ++k)
      ASSERT_EQ(bits(lanes[k]), bits(sum(v[k])))
          << "round " << round << ", vector " << k;
  }
}

TEST(Vec, FourByFourTileMatchesSingleDots) {
  std::mt19937 rng(11);
  for (int64_t n : {1, 15, 16, 17, 128, 131, 512}) {
    std::vector<float> a(4 * size_t(n)), b(4 * size_t(n));
    for (float &x : a)
      x = wild(rng);
    for (float &x : b)
      x = wild(rng);
    const float *ap[4], *bp[4];
    for (int i = 0; i < 4; ++i) {
      ap[i] = a.data() + i * n;
      bp[i] = b.data() + i * n;
    }
    float tile[16];
    dotTile<4, 4>(ap, bp, n, tile, 4);
    for (int x = 0; x < 4; ++x)
      for (int y = 0; y < 4; ++y)
        ASSERT_EQ(bits(tile[x * 4 + y]), bits(dot(ap[x], bp[y], n)))
            << "n " << n << ", dot " << x << "," << y;
  }
}

} // namespace
