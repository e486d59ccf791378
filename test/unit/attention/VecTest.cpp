//===- VecTest.cpp - The shared dot-product loops, bit for bit ------------===//
//
// vec::sum16 folds 16 lane sums together; each must be sum()'s bits (the
// same additions in the same order), and a 4 x 4 dot tile, which uses it,
// must give every dot the bits of the same dot computed alone; dot and axpy
// grids over BF16 rows must give the bits of the same grids over the rows'
// float copies (MLA reads kv_b that way). Inputs mix
// magnitudes and signs so a different order of additions would round
// differently.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/attention/Vec.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <utility>
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

/// dotGrid and axpyGrid with tile width W over `tokens` rows of x against
/// the weight rows `wp` (floats or BF16 bits): dots, then y after the axpy.
template <int W, class E>
std::pair<std::vector<float>, std::vector<float>>
grids(const std::vector<float> &x, int64_t tokens, const std::vector<E *> &wp,
      int64_t n, const std::vector<float> &a, std::vector<float> y) {
  const int64_t rows = int64_t(wp.size());
  std::vector<const float *> xp;
  std::vector<float *> yp;
  for (int64_t t = 0; t < tokens; ++t) {
    xp.push_back(x.data() + t * n);
    yp.push_back(y.data() + t * n);
  }
  std::vector<float> d(size_t(tokens * rows));
  dotGrid<W>(xp.data(), tokens, wp.data(), rows, n, d.data(), rows);
  axpyGrid<W>(yp.data(), tokens, a.data(), rows, wp.data(), rows, n);
  return {d, y};
}

TEST(Vec, GridsGiveTheSameBitsForBf16RowsAndEveryTileWidth) {
  std::mt19937 rng(13);
  // Row and token counts cover the wide and narrow tiles and the single-row
  // tails; lengths the 64-, 32-, 16-column and scalar tails.
  constexpr int64_t kTokens = 5;
  for (int64_t rows : {1, 2, 4, 7}) {
    for (int64_t n : {5, 16, 48, 80, 512, 515}) {
      std::vector<uint16_t> w(size_t(rows * n));
      std::vector<float> wf(w.size());
      for (size_t i = 0; i < w.size(); ++i) {
        w[i] = kiln::floatToBf16(wild(rng));
        wf[i] = kiln::bf16ToFloat(w[i]);
      }
      std::vector<const uint16_t *> wp(static_cast<size_t>(rows));
      std::vector<const float *> wfp(static_cast<size_t>(rows));
      for (int64_t r = 0; r < rows; ++r) {
        wp[size_t(r)] = w.data() + r * n;
        wfp[size_t(r)] = wf.data() + r * n;
      }
      std::vector<float> x(size_t(kTokens * n)), a(size_t(kTokens * rows)),
          y(x.size());
      for (std::vector<float> *v : {&x, &a, &y})
        for (float &e : *v)
          e = wild(rng);
      const auto want = grids<kTileWide>(x, kTokens, wfp, n, a, y);
      const std::pair<const char *, decltype(want)> runs[] = {
          {"bf16 wide", grids<kTileWide>(x, kTokens, wp, n, a, y)},
          {"f32 narrow", grids<kTileNarrow>(x, kTokens, wfp, n, a, y)},
          {"bf16 narrow", grids<kTileNarrow>(x, kTokens, wp, n, a, y)}};
      for (const auto &[name, got] : runs) {
        for (size_t i = 0; i < want.first.size(); ++i)
          ASSERT_EQ(bits(got.first[i]), bits(want.first[i]))
              << name << ": dot " << i << ", rows " << rows << ", n " << n;
        for (size_t i = 0; i < want.second.size(); ++i)
          ASSERT_EQ(bits(got.second[i]), bits(want.second[i]))
              << name << ": axpy " << i << ", rows " << rows << ", n " << n;
      }
    }
  }
}

} // namespace
