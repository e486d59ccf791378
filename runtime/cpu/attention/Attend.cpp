//===- Attend.cpp ---------------------------------------------------------===//

#include "runtime/cpu/attention/Attend.h"

#include "runtime/cpu/MatmulBf16.h"
#include "runtime/cpu/attention/Parallel.h"
#include "runtime/cpu/attention/Vec.h"
#include "runtime/cpu/attention/Workspace.h"

#include <algorithm>
#include <cmath>
#include <limits>

using namespace kiln::cpu;
using namespace kiln::cpu::detail;

namespace {

/// Keys converted and scored together; query heads of a group reuse them.
constexpr int64_t kBlock = 16;

struct Buffers {
  float *keyBlock;   // [kBlock, keyDim], BF16 caches only
  float *valueBlock; // [kBlock, valueDim], separate BF16 values only
  const float **keyPtr, **valuePtr; // [kBlock]
  const float **queryPtr;           // [group]
  float **outPtr;                   // [group]
  float *scores;                    // [group, kBlock]
  float *maxScore, *sum;            // [group]
  // AttendProblem::bf16 only:
  uint16_t *keyBf16;         // [kBlock, keyDim] + padding, rounded keys
  uint16_t *valueBf16;       // [kBlock, valueDim] + padding, separate values
  const uint16_t **valueRow; // [kBlock]
  uint16_t *pairs;           // packPairsBf16 of the block's values
  uint16_t *queryBf16;       // [group, bf16RowLength(keyDim)]
  uint16_t *weightBf16;      // [group, kBlock] softmax weights
};

Buffers carve(Carver &c, const AttendProblem &p) {
  const int64_t rep = p.qHeads / p.kvHeads;
  Buffers b;
  b.keyBlock = c.take<float>(kBlock * p.keyDim);
  b.valueBlock = c.take<float>(p.valuesInKeyRows ? 0 : kBlock * p.valueDim);
  b.keyPtr = c.take<const float *>(kBlock);
  b.valuePtr = c.take<const float *>(kBlock);
  b.queryPtr = c.take<const float *>(rep);
  b.outPtr = c.take<float *>(rep);
  b.scores = c.take<float>(rep * kBlock);
  b.maxScore = c.take<float>(rep);
  b.sum = c.take<float>(rep);
  const int64_t n = p.bf16 ? 1 : 0; // BF16 buffers only where used
  b.keyBf16 = c.take<uint16_t>(n * (kBlock * p.keyDim + 32));
  b.valueBf16 =
      c.take<uint16_t>(p.valuesInKeyRows ? 0 : n * (kBlock * p.valueDim + 32));
  b.valueRow = c.take<const uint16_t *>(n * kBlock);
  b.pairs = c.take<uint16_t>(n * bf16Pairs(kBlock) * 2 * p.valueDim);
  b.queryBf16 = c.take<uint16_t>(n * rep * bf16RowLength(p.keyDim));
  b.weightBf16 = c.take<uint16_t>(n * rep * kBlock);
  return b;
}

size_t perThreadBytes(const AttendProblem &p) {
  Carver c;
  carve(c, p);
  return c.used();
}

/// Gathers up to kBlock keys of `list` (or 0..n-1) starting at `*next`,
/// skipping negative positions; returns how many it gathered. BF16 rows are
/// converted once per group of query heads.
KILN_ATTN_INLINE int64_t gatherBlock(const AttendProblem &p, int32_t seq,
                                     const int32_t *list, int64_t n,
                                     int64_t *next, int64_t keyCol,
                                     int64_t valueCol, const Buffers &b) {
  int64_t count = 0;
  for (int64_t &i = *next; i < n && count < kBlock; ++i) {
    const int32_t pos = list ? list[i] : int32_t(i);
    if (pos < 0)
      continue;
    const float *k = vec::cacheColumns(p.keys, p.keys.row(seq, pos), keyCol,
                                       p.keyDim, b.keyBlock + count * p.keyDim);
    b.keyPtr[count] = k;
    b.valuePtr[count] =
        p.valuesInKeyRows
            ? k + (valueCol - keyCol)
            : vec::cacheColumns(p.values, p.values.row(seq, pos), valueCol,
                                p.valueDim, b.valueBlock + count * p.valueDim);
    ++count;
  }
  return count;
}

/// Asks for the cache lines of the next kBlock keys of `list` (from entry
/// `next` of its n, columns [col, col + keyDim)) while the current block is
/// scored. A top-k list scatters its keys over the whole context, where the
/// hardware prefetchers, which follow addresses that step evenly, cannot see
/// them coming. Prefetches change no value.
KILN_ATTN_INLINE void prefetchListed(const AttendProblem &p, int32_t seq,
                                     const int32_t *list, int64_t n,
                                     int64_t next, int64_t col) {
  const int64_t elemBytes = p.keys.elem == CacheElem::F32 ? 4 : 2;
  const int64_t first = col * elemBytes, last = (col + p.keyDim) * elemBytes;
  for (int64_t i = next, found = 0; i < n && found < kBlock; ++i) {
    if (list[i] < 0)
      continue;
    const uint8_t *row = p.keys.row(seq, list[i]);
    for (int64_t b = first; b < last; b += 64)
      __builtin_prefetch(row + b);
    ++found;
  }
}

/// Token t's query heads [h0, h0 + group), all reading KV head kvHead:
/// where their keys, queries and outputs are.
struct Group {
  int32_t seq;
  const int32_t *list; // null: keys 0..n-1
  int64_t n, keyCol, valueCol, heads;
  const float *q; // [heads, keyDim]
  float *out;     // [heads, valueDim]
};

/// Group for (t, kvHead, h0, heads), its online-softmax state reset and its
/// outputs zeroed.
KILN_ATTN_INLINE Group startGroup(const AttendProblem &p, int64_t t,
                                  int64_t kvHead, int64_t h0, int64_t heads,
                                  const Buffers &b) {
  Group g;
  g.seq = p.seqIds[t];
  g.list = p.keyLists ? p.keyLists + t * p.keyListWidth : nullptr;
  g.n = g.list ? p.keyListWidth : int64_t(p.positions[t]) + 1;
  g.keyCol = p.keyCol + kvHead * p.keyHeadStride;
  g.valueCol = p.valueCol + kvHead * p.valueHeadStride;
  g.heads = heads;
  g.q = p.q + (t * p.qHeads + h0) * p.keyDim;
  g.out = p.out + (t * p.qHeads + h0) * p.valueDim;
  for (int64_t h = 0; h < heads; ++h) {
    b.maxScore[h] = -std::numeric_limits<float>::infinity();
    b.sum[h] = 0.0f;
    b.queryPtr[h] = g.q + h * p.keyDim;
    b.outPtr[h] = g.out + h * p.valueDim;
  }
  std::fill(g.out, g.out + heads * p.valueDim, 0.0f);
  return g;
}

/// Online softmax of a block's `count` scores (b.scores, a row per head):
/// rescales what was summed under the old maximum, then turns the scores
/// into weights.
KILN_ATTN_INLINE void softmaxBlock(const AttendProblem &p, const Group &g,
                                   int64_t count, const Buffers &b) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  for (int64_t h = 0; h < g.heads; ++h) {
    float *s = b.scores + h * kBlock;
    float blockMax = kNegInf;
    for (int64_t j = 0; j < count; ++j) {
      s[j] *= p.scale;
      blockMax = std::max(blockMax, s[j]);
    }
    const float m = std::max(b.maxScore[h], blockMax);
    if (m == kNegInf) {
      std::fill(s, s + count, 0.0f);
      continue;
    }
    if (m > b.maxScore[h] && b.maxScore[h] != kNegInf) {
      const float c = std::exp(b.maxScore[h] - m);
      vec::scale(b.outPtr[h], c, p.valueDim);
      b.sum[h] *= c;
    }
    for (int64_t j = 0; j < count; ++j) {
      s[j] = std::exp(s[j] - m);
      b.sum[h] += s[j];
    }
    b.maxScore[h] = m;
  }
}

/// Divides each head's output by its softmax sum.
KILN_ATTN_INLINE void finishGroup(const AttendProblem &p, const Group &g,
                                  const Buffers &b) {
  for (int64_t h = 0; h < g.heads; ++h)
    vec::scale(b.outPtr[h], b.sum[h] > 0.0f ? 1.0f / b.sum[h] : 0.0f,
               p.valueDim);
}

/// Columns [col, col + n) of a cache row rounded to BF16 into out (n values,
/// then zeros up to bf16RowLength(n)).
void roundCacheColumns(const KvView &view, const uint8_t *row, int64_t col,
                       int64_t n, uint16_t *out) {
  if (view.elem == CacheElem::F32) {
    roundRowBf16(reinterpret_cast<const float *>(row) + col, n, out);
    return;
  }
  std::copy_n(reinterpret_cast<const uint16_t *>(row) + col, n, out);
  std::fill(out + n, out + bf16RowLength(n), uint16_t(0));
}

/// gatherBlock for AttendProblem::bf16: key j rounded at b.keyBf16 + j *
/// keyDim (rows one after another, as a weight's), its values at
/// b.valueRow[j].
int64_t gatherBlockBf16(const AttendProblem &p, int32_t seq,
                        const int32_t *list, int64_t n, int64_t *next,
                        int64_t keyCol, int64_t valueCol, const Buffers &b) {
  int64_t count = 0;
  for (int64_t &i = *next; i < n && count < kBlock; ++i) {
    const int32_t pos = list ? list[i] : int32_t(i);
    if (pos < 0)
      continue;
    uint16_t *k = b.keyBf16 + count * p.keyDim;
    roundCacheColumns(p.keys, p.keys.row(seq, pos), keyCol, p.keyDim, k);
    if (p.valuesInKeyRows) {
      b.valueRow[count] = k + (valueCol - keyCol);
    } else {
      uint16_t *v = b.valueBf16 + count * p.valueDim;
      roundCacheColumns(p.values, p.values.row(seq, pos), valueCol, p.valueDim,
                        v);
      b.valueRow[count] = v;
    }
    ++count;
  }
  return count;
}

/// The next block of up to kBlock keys from entry *next of g's list (BF16
/// rounded where Bf16), the block after it asked for; 0 at the end.
template <bool Bf16>
KILN_ATTN_INLINE int64_t nextBlock(const AttendProblem &p, const Group &g,
                                   int64_t *next, const Buffers &b) {
  int64_t count;
  if constexpr (Bf16)
    count =
        gatherBlockBf16(p, g.seq, g.list, g.n, next, g.keyCol, g.valueCol, b);
  else
    count = gatherBlock(p, g.seq, g.list, g.n, next, g.keyCol, g.valueCol, b);
  if (count > 0 && g.list)
    prefetchListed(p, g.seq, g.list, g.n, *next, g.keyCol);
  return count;
}

/// Query heads [h0, h0 + group) of token t, all reading KV head kvHead.
template <int W>
KILN_ATTN_INLINE void attendGroupBody(const AttendProblem &p, int64_t t,
                                      int64_t kvHead, int64_t h0, int64_t group,
                                      const Buffers &b) {
  const Group g = startGroup(p, t, kvHead, h0, group, b);
  int64_t next = 0;
  while (const int64_t count = nextBlock<false>(p, g, &next, b)) {
    vec::dotGrid<W>(b.queryPtr, group, b.keyPtr, count, p.keyDim, b.scores,
                    kBlock);
    softmaxBlock(p, g, count, b);
    vec::axpyGrid<W>(b.outPtr, group, b.scores, kBlock, b.valuePtr, count,
                     p.valueDim);
  }
  finishGroup(p, g, b);
}
KILN_ATTN_PATHS(attendGroup,
                (const AttendProblem &p, int64_t t, int64_t kvHead, int64_t h0,
                 int64_t group, const Buffers &b),
                (p, t, kvHead, h0, group, b))

/// attendGroup with BF16 products (AttendProblem::bf16): the same blocks,
/// the same FP32 online softmax; the scores are a BF16 matmul of the
/// queries with the block's keys as weight rows, and the weighted values a
/// pair-form sum (MatmulBf16.h), both on the best kernel for the CPU.
void attendGroupBf16(const AttendProblem &p, int64_t t, int64_t kvHead,
                     int64_t h0, int64_t group, const Buffers &b) {
  const Group g = startGroup(p, t, kvHead, h0, group, b);
  const int64_t queryLength = bf16RowLength(p.keyDim);
  for (int64_t h = 0; h < group; ++h)
    roundRowBf16(g.q + h * p.keyDim, p.keyDim, b.queryBf16 + h * queryLength);

  MatmulRows scores;
  scores.xBf16 = b.queryBf16;
  scores.tokens = group;
  scores.y = b.scores;
  scores.yStride = kBlock;
  WeightView keys;
  keys.format = WeightFormat::BF16;
  keys.data = b.keyBf16;
  keys.cols = p.keyDim;

  int64_t next = 0;
  while (const int64_t count = nextBlock<true>(p, g, &next, b)) {
    keys.rows = count;
    matmulRowsBf16(scores, keys, 0, count);
    softmaxBlock(p, g, count, b);
    for (int64_t h = 0; h < group; ++h) {
      const float *s = b.scores + h * kBlock;
      uint16_t *w = b.weightBf16 + h * kBlock;
      for (int64_t j = 0; j < kBlock; ++j)
        w[j] = j < count ? roundToBf16(s[j]) : uint16_t(0);
    }
    packPairsBf16(b.valueRow, count, p.valueDim, b.pairs);
    axpyPairsBf16(b.outPtr, group, b.weightBf16, kBlock, b.pairs,
                  bf16Pairs(count), p.valueDim);
  }
  finishGroup(p, g, b);
}

} // namespace

size_t kiln::cpu::detail::attendWorkspaceBytes(const AttendProblem &p,
                                               int threads) {
  return perThreadBytes(p) * size_t(std::max(1, threads));
}

void kiln::cpu::detail::attend(ThreadPool &pool, const AttendProblem &p,
                               uint8_t *workspace) {
  if (p.tokens <= 0 || p.qHeads <= 0)
    return;
  const int64_t rep = p.qHeads / p.kvHeads;
  // Split each KV head's query heads into groups only as far as needed to
  // give every thread an item: a group converts each BF16 key block once.
  const int64_t units = p.tokens * p.kvHeads;
  const int64_t wanted =
      std::min(rep, (int64_t(pool.size()) + units - 1) / units);
  const int64_t group = (rep + wanted - 1) / wanted;
  const int64_t groupsPerHead = (rep + group - 1) / group;
  const size_t stride = perThreadBytes(p);
  // An item's multiply-adds: scores and values of its heads over the keys
  // its token reads (the mean over the tokens).
  int64_t keys = 0;
  for (int64_t t = 0; t < p.tokens; ++t)
    keys += p.keyLists ? std::min<int64_t>(p.keyListWidth, p.positions[t] + 1)
                       : p.positions[t] + 1;
  const int64_t itemCost = keys / p.tokens * (p.keyDim + p.valueDim) * group;
  forEachItem(
      pool, units * groupsPerHead,
      [&](int64_t item, int worker) {
        Carver c(workspace + size_t(worker) * stride);
        const Buffers b = carve(c, p);
        const int64_t g = item % groupsPerHead;
        const int64_t unit = item / groupsPerHead;
        const int64_t kvHead = unit % p.kvHeads, t = unit / p.kvHeads;
        const int64_t h0 = kvHead * rep + g * group;
        const int64_t heads = std::min(group, rep - g * group);
        if (p.bf16)
          attendGroupBf16(p, t, kvHead, h0, heads, b);
        else
          attendGroup(p, t, kvHead, h0, heads, b);
      },
      itemCost);
}
