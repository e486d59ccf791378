//===- Attend.cpp ---------------------------------------------------------===//

#include "runtime/cpu/attention/Attend.h"

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

/// Query heads [h0, h0 + group) of token t, all reading KV head kvHead.
template <int W>
KILN_ATTN_INLINE void attendGroupBody(const AttendProblem &p, int64_t t,
                                      int64_t kvHead, int64_t h0, int64_t group,
                                      const Buffers &b) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  const int32_t seq = p.seqIds[t];
  const int32_t *list = p.keyLists ? p.keyLists + t * p.keyListWidth : nullptr;
  const int64_t n = list ? p.keyListWidth : int64_t(p.positions[t]) + 1;
  const int64_t keyCol = p.keyCol + kvHead * p.keyHeadStride;
  const int64_t valueCol = p.valueCol + kvHead * p.valueHeadStride;
  const float *q = p.q + (t * p.qHeads + h0) * p.keyDim;
  float *out = p.out + (t * p.qHeads + h0) * p.valueDim;

  for (int64_t g = 0; g < group; ++g) {
    b.maxScore[g] = kNegInf;
    b.sum[g] = 0.0f;
    b.queryPtr[g] = q + g * p.keyDim;
    b.outPtr[g] = out + g * p.valueDim;
  }
  std::fill(out, out + group * p.valueDim, 0.0f);

  int64_t next = 0;
  for (;;) {
    const int64_t count =
        gatherBlock(p, seq, list, n, &next, keyCol, valueCol, b);
    if (count == 0)
      break;
    if (list)
      prefetchListed(p, seq, list, n, next, keyCol);
    vec::dotGrid<W>(b.queryPtr, group, b.keyPtr, count, p.keyDim, b.scores,
                    kBlock);
    // Online softmax: rescale what was summed under the old maximum, then
    // turn this block's scores into weights.
    for (int64_t g = 0; g < group; ++g) {
      float *s = b.scores + g * kBlock;
      float blockMax = kNegInf;
      for (int64_t j = 0; j < count; ++j) {
        s[j] *= p.scale;
        blockMax = std::max(blockMax, s[j]);
      }
      const float m = std::max(b.maxScore[g], blockMax);
      if (m == kNegInf) {
        std::fill(s, s + count, 0.0f);
        continue;
      }
      if (m > b.maxScore[g] && b.maxScore[g] != kNegInf) {
        const float c = std::exp(b.maxScore[g] - m);
        vec::scale(b.outPtr[g], c, p.valueDim);
        b.sum[g] *= c;
      }
      for (int64_t j = 0; j < count; ++j) {
        s[j] = std::exp(s[j] - m);
        b.sum[g] += s[j];
      }
      b.maxScore[g] = m;
    }
    vec::axpyGrid<W>(b.outPtr, group, b.scores, kBlock, b.valuePtr, count,
                     p.valueDim);
  }
  for (int64_t g = 0; g < group; ++g)
    vec::scale(b.outPtr[g], b.sum[g] > 0.0f ? 1.0f / b.sum[g] : 0.0f,
               p.valueDim);
}
KILN_ATTN_PATHS(attendGroup,
                (const AttendProblem &p, int64_t t, int64_t kvHead, int64_t h0,
                 int64_t group, const Buffers &b),
                (p, t, kvHead, h0, group, b))

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
        attendGroup(p, t, kvHead, h0, std::min(group, rep - g * group), b);
      },
      itemCost);
}
