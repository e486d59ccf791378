//===- GqaTest.cpp - Grouped-query attention vs a naive double reference --===//
//
// Tolerance: rel L2 <= 1e-5 against double on the same (possibly BF16)
// cache rows.
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"

#include <cstring>

using namespace kiln::cpu;
using namespace kiln::cpu::test;

namespace {

struct GqaCase {
  int64_t qHeads = 6, kvHeads = 2, headDim = 16, valueDim = 8;
  Tokens tok;
  std::vector<float> q;
  FilledCache keys, values;

  GqaCase(CacheElem elem, int64_t tokens, uint32_t seed) {
    std::mt19937 rng(seed);
    const std::vector<int64_t> lengths = {50, 7, 90};
    for (int64_t t = 0; t < tokens; ++t) {
      const int32_t s = int32_t(rng() % 3);
      tok.add(s, int32_t(rng() % lengths[s]));
    }
    q = randomVector(rng, tokens * qHeads * headDim);
    keys = fillCache(rng, kvHeads * headDim, elem, 16, lengths);
    values = fillCache(rng, kvHeads * valueDim, elem, 16, lengths);
  }

  GqaArgs args() const {
    GqaArgs a;
    a.tokens = tok.size();
    a.seqIds = tok.seq.data();
    a.positions = tok.pos.data();
    a.qHeads = qHeads;
    a.kvHeads = kvHeads;
    a.headDim = headDim;
    a.valueDim = valueDim;
    a.q = q.data();
    a.keys = keys.cache->view();
    a.values = values.cache->view();
    a.scale = 1.0f / std::sqrt(float(headDim));
    return a;
  }

  std::vector<float> reference() const {
    std::vector<float> out(tok.size() * qHeads * valueDim);
    const int64_t rep = qHeads / kvHeads;
    for (int64_t t = 0; t < tok.size(); ++t)
      for (int64_t h = 0; h < qHeads; ++h) {
        const int64_t kv = h / rep;
        const std::vector<float> &k = keys.rows[tok.seq[t]];
        const std::vector<float> &v = values.rows[tok.seq[t]];
        const int64_t n = tok.pos[t] + 1;
        std::vector<double> p(n);
        double m = -1e300, sum = 0;
        for (int64_t s = 0; s < n; ++s) {
          double dot = 0;
          for (int64_t i = 0; i < headDim; ++i)
            dot += double(q[(t * qHeads + h) * headDim + i]) *
                   k[s * kvHeads * headDim + kv * headDim + i];
          p[s] = dot / std::sqrt(double(headDim));
          m = std::max(m, p[s]);
        }
        for (double &x : p)
          sum += (x = std::exp(x - m));
        for (int64_t i = 0; i < valueDim; ++i) {
          double o = 0;
          for (int64_t s = 0; s < n; ++s)
            o += p[s] * v[s * kvHeads * valueDim + kv * valueDim + i];
          out[(t * qHeads + h) * valueDim + i] = float(o / sum);
        }
      }
    return out;
  }
};

std::vector<float> run(const GqaArgs &a, int threads) {
  ThreadPool pool(threads);
  Workspace ws;
  std::vector<float> out(a.tokens * a.qHeads * a.valueDim, NAN);
  gqaAttention(pool, a, out.data(), ws);
  return out;
}

TEST(Gqa, MatchesReferenceF32Cache) {
  GqaCase c(CacheElem::F32, 20, 1);
  EXPECT_LE(relL2(run(c.args(), 2), c.reference()), 1e-5);
}

TEST(Gqa, MatchesReferenceBf16Cache) {
  GqaCase c(CacheElem::BF16, 20, 2);
  EXPECT_LE(relL2(run(c.args(), 2), c.reference()), 1e-5);
}

TEST(Gqa, MultiQueryAndOneToOne) {
  for (int64_t kvHeads : {1, 6}) {
    GqaCase c(CacheElem::BF16, 10, 3);
    c.kvHeads = kvHeads;
    std::mt19937 rng(4);
    const std::vector<int64_t> lengths = {50, 7, 90};
    c.keys = fillCache(rng, kvHeads * c.headDim, CacheElem::BF16, 16, lengths);
    c.values =
        fillCache(rng, kvHeads * c.valueDim, CacheElem::BF16, 16, lengths);
    EXPECT_LE(relL2(run(c.args(), 2), c.reference()), 1e-5) << kvHeads;
  }
}

TEST(Gqa, ThreadCountDoesNotChangeBits) {
  GqaCase c(CacheElem::BF16, 33, 5);
  const std::vector<float> one = run(c.args(), 1);
  for (int threads : {2, 3}) {
    const std::vector<float> many = run(c.args(), threads);
    EXPECT_EQ(std::memcmp(one.data(), many.data(), one.size() * 4), 0)
        << threads;
  }
  // One token: the thread count changes how query heads are grouped.
  GqaCase d(CacheElem::BF16, 1, 6);
  d.qHeads = 12;
  d.q.resize(12 * 16, 0.75f);
  const std::vector<float> single = run(d.args(), 1);
  for (int threads : {2, 3, 5, 8}) {
    const std::vector<float> many = run(d.args(), threads);
    EXPECT_EQ(std::memcmp(single.data(), many.data(), single.size() * 4), 0)
        << threads;
  }
  EXPECT_LE(relL2(single, d.reference()), 1e-5);
}

TEST(Gqa, Bf16ProductsKeepTheirBitsAcrossThreadsAndPaths) {
  GqaCase c(CacheElem::F32, 33, 7);
  const std::vector<float> exact = run(c.args(), 2);
  std::vector<float> one, scalar;
  {
    Bf16ActivationsScope bf16;
    one = run(c.args(), 1);
    for (int threads : {2, 3}) {
      const std::vector<float> many = run(c.args(), threads);
      EXPECT_EQ(std::memcmp(one.data(), many.data(), one.size() * 4), 0)
          << threads;
    }
  }
  {
    Bf16ActivationsScope bf16;
    ScalarScope scalarPath;
    scalar = run(c.args(), 2);
  }
  EXPECT_EQ(std::memcmp(one.data(), scalar.data(), one.size() * 4), 0);
  EXPECT_LE(relL2(one, c.reference()), 2e-2);
  EXPECT_GT(relL2(one, exact), 0.0);
}

} // namespace
