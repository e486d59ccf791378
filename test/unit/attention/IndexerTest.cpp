//===- IndexerTest.cpp - DSA lightning indexer top-k ----------------------===//

#include "TestUtil.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>

using namespace kiln::cpu;
using namespace kiln::cpu::test;

namespace {

struct IndexerCase {
  int64_t heads = 4, dim = 32, k = 8;
  Tokens tok;
  std::vector<float> q, w;
  FilledCache cache;

  IndexerCase(CacheElem elem, const std::vector<int64_t> &lengths,
              int64_t tokens, uint32_t seed) {
    std::mt19937 rng(seed);
    for (int64_t t = 0; t < tokens; ++t) {
      const int32_t s = int32_t(rng() % lengths.size());
      tok.add(s, int32_t(rng() % lengths[s]));
    }
    q = randomVector(rng, tokens * heads * dim);
    w = randomVector(rng, tokens * heads, 1.0f / std::sqrt(float(heads)));
    cache = fillCache(rng, dim, elem, 8, lengths);
  }

  IndexerArgs args() const {
    IndexerArgs a;
    a.tokens = tok.size();
    a.seqIds = tok.seq.data();
    a.positions = tok.pos.data();
    a.heads = heads;
    a.dim = dim;
    a.q = q.data();
    a.weights = w.data();
    a.keys = cache.cache->view();
    a.scale = 1.0f / std::sqrt(float(dim));
    a.k = k;
    return a;
  }

  /// Naive double I[t, s] and selection: sort by (score desc, position asc),
  /// keep k, list ascending, pad with -1.
  std::vector<int32_t> reference() const {
    std::vector<int32_t> out(tok.size() * k, -1);
    for (int64_t t = 0; t < tok.size(); ++t) {
      const std::vector<float> &keys = cache.rows[tok.seq[t]];
      std::vector<std::pair<double, int32_t>> ranked;
      for (int32_t s = 0; s <= tok.pos[t]; ++s) {
        double total = 0;
        for (int64_t h = 0; h < heads; ++h) {
          double dot = 0;
          for (int64_t i = 0; i < dim; ++i)
            dot += double(q[(t * heads + h) * dim + i]) * keys[s * dim + i];
          total += double(w[t * heads + h]) *
                   std::max(0.0, dot / std::sqrt(double(dim)));
        }
        ranked.push_back({-total, s});
      }
      std::sort(ranked.begin(), ranked.end());
      ranked.resize(std::min<size_t>(ranked.size(), k));
      std::vector<int32_t> chosen;
      for (auto &r : ranked)
        chosen.push_back(r.second);
      std::sort(chosen.begin(), chosen.end());
      std::copy(chosen.begin(), chosen.end(), out.begin() + t * k);
    }
    return out;
  }
};

std::vector<int32_t> run(const IndexerArgs &a, int threads) {
  ThreadPool pool(threads);
  Workspace ws;
  std::vector<int32_t> out(a.tokens * a.k, -7);
  indexerTopK(pool, a, out.data(), ws);
  return out;
}

TEST(Indexer, MatchesNaiveReference) {
  for (CacheElem elem : {CacheElem::F32, CacheElem::BF16}) {
    IndexerCase c(elem, {300, 40, 9}, 24, 5);
    EXPECT_EQ(run(c.args(), 2), c.reference());
  }
}

TEST(Indexer, ChunkedScoresGiveTheSameSelection) {
  IndexerCase c(CacheElem::BF16, {300, 40, 9}, 24, 6);
  IndexerArgs a = c.args();
  const std::vector<int32_t> whole = run(a, 2);
  a.maxScores = 350; // several chunks, one token each at most a few
  EXPECT_EQ(run(a, 2), whole);
  a.maxScores = 1; // every token alone
  EXPECT_EQ(run(a, 2), whole);
  EXPECT_EQ(whole, c.reference());
}

TEST(Indexer, ThreadCountDoesNotChangeResult) {
  IndexerCase c(CacheElem::BF16, {500, 130}, 16, 7);
  const std::vector<int32_t> one = run(c.args(), 1);
  EXPECT_EQ(one, run(c.args(), 2));
  EXPECT_EQ(one, run(c.args(), 3));
}

TEST(Indexer, FewerKeysThanKPadWithMinusOne) {
  IndexerCase c(CacheElem::F32, {3}, 1, 8);
  c.tok = Tokens();
  c.tok.add(0, 2);
  c.k = 5;
  EXPECT_EQ(run(c.args(), 2), (std::vector<int32_t>{0, 1, 2, -1, -1}));
}

/// A one-token problem over hand-written keys.
struct HandCase {
  int64_t heads, dim;
  std::vector<float> q, w, keys;

  std::vector<int32_t> select(int64_t k) {
    const int64_t n = int64_t(keys.size()) / dim;
    PagedKvCache cache(dim, CacheElem::F32, 4);
    EXPECT_TRUE(cache.ensure(0, n).isOk());
    std::vector<int32_t> seq(n, 0), pos(n);
    for (int64_t i = 0; i < n; ++i)
      pos[i] = int32_t(i);
    kvAppend(cache.view(), seq.data(), pos.data(), n, keys.data());
    IndexerArgs a;
    a.tokens = 1;
    const int32_t s = 0, p = int32_t(n - 1);
    a.seqIds = &s;
    a.positions = &p;
    a.heads = heads;
    a.dim = dim;
    a.q = q.data();
    a.weights = w.data();
    a.keys = cache.view();
    a.scale = 1.0f;
    a.k = k;
    return run(a, 2);
  }
};

TEST(Indexer, ReluIsPerHeadBeforeTheWeightedSum) {
  // Head 0 reads dim 0, head 1 reads dim 1, weights 1 and 1.
  // Key 0: head dots (+1, -10): with ReLU 1, without 1 - 10 = -9.
  // Key 1: head dots (0.5, 0):  0.5 either way.
  // Key 2: head dots (0.2, 0):  0.2 either way.
  // Top 2 with ReLU: {0, 1}; without it would be {1, 2}.
  HandCase c{2, 2, {1, 0, 0, 1}, {1, 1}, {1, -10, 0.5f, 0, 0.2f, 0}};
  EXPECT_EQ(c.select(2), (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(c.select(1), (std::vector<int32_t>{0}));
}

TEST(Indexer, TiesGoToTheLowerPosition) {
  // Scores by position: 1, 3, 2, 3, 3, 0: k = 2 takes 1 and 3 (not 4).
  HandCase c{1, 1, {1}, {1}, {1, 3, 2, 3, 3, 0}};
  EXPECT_EQ(c.select(2), (std::vector<int32_t>{1, 3}));
  EXPECT_EQ(c.select(4), (std::vector<int32_t>{1, 2, 3, 4}));
  // All equal (all ReLU'd to zero): the first k positions.
  HandCase zeros{1, 1, {1}, {1}, {-1, -2, -3, -4, -5}};
  EXPECT_EQ(zeros.select(3), (std::vector<int32_t>{0, 1, 2}));
}

TEST(Indexer, ManyKeysAndTiesSelectAsTheTotalOrderDoes) {
  // 6,000 keys from a few values (so most scores tie), zeros of both signs,
  // infinities and negatives (ReLU'd to zero); weights +1 and -1 (scores of
  // either sign). The selection must be the first k of (score descending,
  // position ascending), listed by position, for k from 1 to n - 1.
  const float values[] = {0.0f,  -0.0f, 1.0f, 2.5f,     -3.0f,
                          1e30f, 1e-3f, 2.5f, INFINITY, -INFINITY};
  std::mt19937 rng(11);
  std::vector<float> keys(6000);
  for (float &v : keys)
    v = values[rng() % std::size(values)];
  for (float weight : {1.0f, -1.0f}) {
    HandCase c{1, 1, {1}, {weight}, keys};
    for (int64_t k : {1, 7, 2048, 5999}) {
      std::vector<int32_t> ranked(keys.size());
      std::vector<float> score(keys.size());
      for (size_t i = 0; i < keys.size(); ++i) {
        ranked[i] = int32_t(i);
        score[i] = 0.0f + weight * std::max(0.0f, keys[i]);
      }
      std::stable_sort(ranked.begin(), ranked.end(), [&](int32_t x, int32_t y) {
        return score[x] > score[y];
      });
      ranked.resize(size_t(k));
      std::sort(ranked.begin(), ranked.end());
      EXPECT_EQ(c.select(k), ranked) << "weight " << weight << ", k " << k;
    }
  }
}

} // namespace
