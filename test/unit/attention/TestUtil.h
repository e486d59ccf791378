//===- TestUtil.h - Shared helpers for the attention tests ------*- C++ -*-===//

#ifndef KILN_TEST_UNIT_ATTENTION_TESTUTIL_H
#define KILN_TEST_UNIT_ATTENTION_TESTUTIL_H

#include "runtime/cpu/attention/Attention.h"
#include "test/unit/cpu/ModeScopes.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <vector>

namespace kiln::cpu::test {

inline std::vector<float> randomVector(std::mt19937 &rng, size_t n,
                                       float scale = 1.0f) {
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float &x : v)
    x = dist(rng);
  return v;
}

/// ||a - b|| / ||b||, in double.
inline double relL2(const std::vector<float> &a, const std::vector<float> &b) {
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    den += double(b[i]) * b[i];
  }
  return std::sqrt(num / (den > 0.0 ? den : 1.0));
}

/// A cache holding `rows` random rows for each listed sequence length, and
/// those rows as floats (as stored, i.e. after any BF16 rounding).
struct FilledCache {
  std::unique_ptr<PagedKvCache> cache;
  std::vector<std::vector<float>> rows; // per sequence [length, width]
};

inline FilledCache fillCache(std::mt19937 &rng, int64_t width, CacheElem elem,
                             int64_t pageRows,
                             const std::vector<int64_t> &lengths,
                             float scale = 1.0f) {
  FilledCache f;
  f.cache = std::make_unique<PagedKvCache>(width, elem, pageRows);
  for (size_t s = 0; s < lengths.size(); ++s) {
    EXPECT_TRUE(f.cache->ensure(int32_t(s), lengths[s]).isOk());
    std::vector<float> data = randomVector(rng, lengths[s] * width, scale);
    std::vector<int32_t> seq(lengths[s], int32_t(s)), pos(lengths[s]);
    for (int64_t p = 0; p < lengths[s]; ++p)
      pos[p] = int32_t(p);
    kvAppend(f.cache->view(), seq.data(), pos.data(), lengths[s], data.data());
    std::vector<float> stored(data.size());
    kvRead(f.cache->view(), int32_t(s), lengths[s], stored.data());
    f.rows.push_back(std::move(stored));
  }
  return f;
}

/// Tokens of one call: sequence ids and positions, interleaved on purpose.
struct Tokens {
  std::vector<int32_t> seq, pos;
  int64_t size() const { return int64_t(seq.size()); }
  void add(int32_t s, int32_t p) {
    seq.push_back(s);
    pos.push_back(p);
  }
};

} // namespace kiln::cpu::test

#endif // KILN_TEST_UNIT_ATTENTION_TESTUTIL_H
