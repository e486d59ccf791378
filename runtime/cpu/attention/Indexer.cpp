//===- Indexer.cpp --------------------------------------------------------===//
//
// Tokens are processed in chunks whose scores fit a fixed budget. Per chunk:
// (1) scores for every (token, block of keys), (2) per token, a selection of
// the k best under a strict total order (score descending, then position
// ascending), listed by position (a radix select: selectTopK).
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/attention/Indexer.h"

#include "runtime/cpu/attention/Parallel.h"
#include "runtime/cpu/attention/Vec.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

using namespace kiln::cpu;

namespace {

/// Keys per work item, and per scoring step within it.
constexpr int64_t kKeyBlock = 128;
constexpr int64_t kKeyStep = 16;
/// Default IndexerArgs::maxScores (each score costs a float and an int32).
constexpr int64_t kDefaultMaxScores = int64_t(1) << 21;

int64_t keysOf(const IndexerArgs &a, int64_t t) {
  return int64_t(a.positions[t]) + 1;
}

struct Layout {
  float *scores;      // [budget]
  uint32_t *keys;     // [budget] selectTopK's order keys
  int64_t *offset;    // [T + 1] score offset per chunk token
  int64_t *block;     // [T + 1] first key-block item per chunk token
  uint8_t *perThread; // [threads] x threadBytes
  size_t threadBytes;
};

struct ThreadBuffers {
  float *keys;          // [kKeyStep, Di], BF16 caches only
  const float **keyPtr; // [kKeyStep]
  const float **qPtr;   // [Hi]
  float *dots;          // [Hi, kKeyStep]
};

ThreadBuffers carveThread(Carver &c, const IndexerArgs &a) {
  ThreadBuffers b;
  b.keys = c.take<float>(kKeyStep * a.dim);
  b.keyPtr = c.take<const float *>(kKeyStep);
  b.qPtr = c.take<const float *>(a.heads);
  b.dots = c.take<float>(a.heads * kKeyStep);
  return b;
}

int64_t budgetOf(const IndexerArgs &a) {
  int64_t most = 0, total = 0;
  for (int64_t t = 0; t < a.tokens; ++t) {
    most = std::max(most, keysOf(a, t));
    total += keysOf(a, t);
  }
  const int64_t limit = a.maxScores > 0 ? a.maxScores : kDefaultMaxScores;
  return std::max(most, std::min(total, limit));
}

Layout carve(Carver &c, const IndexerArgs &a, int threads) {
  const int64_t budget = budgetOf(a);
  Layout l;
  l.scores = c.take<float>(budget);
  l.keys = c.take<uint32_t>(budget);
  l.offset = c.take<int64_t>(a.tokens + 1);
  l.block = c.take<int64_t>(a.tokens + 1);
  Carver measure;
  carveThread(measure, a);
  l.threadBytes = measure.used();
  l.perThread = c.take<uint8_t>(int64_t(l.threadBytes) * threads);
  return l;
}

/// Scores keys [s0, s1) of token t into `scores`.
template <int W>
KILN_ATTN_INLINE void scoreBlockBody(const IndexerArgs &a, int64_t t,
                                     int64_t s0, int64_t s1, float *scores,
                                     const ThreadBuffers &b) {
  const int32_t seq = a.seqIds[t];
  const float *w = a.weights + t * a.heads;
  for (int64_t h = 0; h < a.heads; ++h)
    b.qPtr[h] = a.q + (t * a.heads + h) * a.dim;
  for (int64_t first = s0; first < s1; first += kKeyStep) {
    const int64_t count = std::min(kKeyStep, s1 - first);
    for (int64_t j = 0; j < count; ++j)
      b.keyPtr[j] =
          vec::cacheColumns(a.keys, a.keys.row(seq, int32_t(first + j)), 0,
                            a.dim, b.keys + j * a.dim);
    vec::dotGrid<W>(b.qPtr, a.heads, b.keyPtr, count, a.dim, b.dots, kKeyStep);
    for (int64_t j = 0; j < count; ++j) {
      float total = 0.0f;
      for (int64_t h = 0; h < a.heads; ++h)
        total += w[h] * std::max(0.0f, a.scale * b.dots[h * kKeyStep + j]);
      scores[first - s0 + j] =
          std::isnan(total) ? -std::numeric_limits<float>::infinity() : total;
    }
  }
}
KILN_ATTN_PATHS(scoreBlock,
                (const IndexerArgs &a, int64_t t, int64_t s0, int64_t s1,
                 float *scores, const ThreadBuffers &b),
                (a, t, s0, s1, scores, b))

/// A score as an unsigned key in the same order as the float (the two zeros
/// one key; NaN never reaches here, scoreBlock maps it to -inf).
uint32_t orderKey(float score) {
  uint32_t bits;
  const float s = score == 0.0f ? 0.0f : score;
  std::memcpy(&bits, &s, sizeof(bits));
  return bits & 0x80000000u ? ~bits : bits | 0x80000000u;
}

/// The k best of n scores as ascending positions, -1 padded, into out[k]:
/// best by score, then by the lower position (a strict total order). A
/// radix select finds the k-th best key in three passes of 11, 11 and 10
/// bits over the keys (`keys`, n of them), and a last pass lists, in
/// position order, every key above it and the first keys equal to it, so
/// nothing is sorted: O(n). Against nth_element and a sort of the k it took
/// 12-14% off indexer_top_k at 8k positions (bench/RESULTS.md, 2026-12-07).
void selectTopK(const float *scores, uint32_t *keys, int64_t n, int64_t k,
                int32_t *out) {
  if (n <= k) {
    for (int64_t i = 0; i < k; ++i)
      out[i] = i < n ? int32_t(i) : -1;
    return;
  }
  for (int64_t i = 0; i < n; ++i)
    keys[i] = orderKey(scores[i]);
  // Invariant: the k-th best key has the bits of `prefix` above `shift`,
  // and `above` keys are larger than every key with that prefix.
  uint32_t prefix = 0;
  int64_t above = 0;
  int shift = 32;
  for (int width : {11, 11, 10}) {
    const int next = shift - width;
    const uint32_t mask = shift == 32 ? 0 : ~uint32_t(0) << shift;
    int64_t count[2048] = {};
    for (int64_t i = 0; i < n; ++i)
      if ((keys[i] & mask) == prefix)
        ++count[(keys[i] >> next) & ((1u << width) - 1)];
    int64_t bin = (int64_t(1) << width) - 1;
    while (above + count[bin] < k)
      above += count[bin--];
    prefix |= uint32_t(bin) << next;
    shift = next;
  }
  int64_t ties = k - above, taken = 0;
  for (int64_t i = 0; i < n && taken < k; ++i)
    if (keys[i] > prefix || (keys[i] == prefix && ties-- > 0))
      out[taken++] = int32_t(i);
}

} // namespace

size_t kiln::cpu::indexerWorkspaceBytes(const IndexerArgs &a, int threads) {
  Carver c;
  carve(c, a, std::max(1, threads));
  return c.used();
}

void kiln::cpu::indexerTopK(ThreadPool &pool, const IndexerArgs &a,
                            int32_t *out, Workspace &workspace) {
  if (a.tokens <= 0 || a.k <= 0)
    return;
  Carver c(workspace.get(indexerWorkspaceBytes(a, pool.size())));
  const Layout l = carve(c, a, pool.size());
  const int64_t budget = budgetOf(a);

  for (int64_t first = 0; first < a.tokens;) {
    // Take tokens while their scores fit the budget (always at least one).
    int64_t last = first;
    l.offset[0] = 0;
    l.block[0] = 0;
    while (
        last < a.tokens &&
        (last == first || l.offset[last - first] + keysOf(a, last) <= budget)) {
      const int64_t i = last - first, n = keysOf(a, last);
      l.offset[i + 1] = l.offset[i] + n;
      l.block[i + 1] = l.block[i] + (n + kKeyBlock - 1) / kKeyBlock;
      ++last;
    }
    const int64_t count = last - first;

    detail::forEachItem(pool, l.block[count], [&](int64_t item, int w) {
      const int64_t i =
          std::upper_bound(l.block, l.block + count + 1, item) - l.block - 1;
      const int64_t s0 = (item - l.block[i]) * kKeyBlock;
      const int64_t s1 = std::min(keysOf(a, first + i), s0 + kKeyBlock);
      Carver tc(l.perThread + size_t(w) * l.threadBytes);
      scoreBlock(a, first + i, s0, s1, l.scores + l.offset[i] + s0,
                 carveThread(tc, a));
    });
    detail::forEachItem(pool, count, [&](int64_t i, int) {
      selectTopK(l.scores + l.offset[i], l.keys + l.offset[i],
                 keysOf(a, first + i), a.k, out + (first + i) * a.k);
    });
    first = last;
  }
}
