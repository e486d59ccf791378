//===- MoeAlign.cpp - Grouping (token, expert) pairs by expert ------------===//

#include "runtime/cpu/Moe.h"

#include <cstring>

using namespace kiln::cpu;

MoeBlocks kiln::cpu::alignBlocks(const int32_t *ids, int64_t T,
                                 const MoeParams &params, Arena &arena) {
  const int64_t e = params.numExperts, bs = params.blockSize;
  MoeBlocks b;
  b.numPairs = T * params.topK;
  auto *count = arena.alloc<int32_t>(e);
  auto *begin = arena.alloc<int32_t>(e + 1);
  std::memset(count, 0, size_t(e) * sizeof(int32_t));
  for (int64_t p = 0; p < b.numPairs; ++p)
    if (ids[p] >= 0) // < 0: an expert another rank holds
      ++count[ids[p]];
  begin[0] = 0;
  for (int64_t x = 0; x < e; ++x)
    begin[x + 1] = begin[x] + int32_t((count[x] + bs - 1) / bs * bs);
  b.numPadded = begin[e];
  b.numBlocks = b.numPadded / bs;

  auto *sorted = arena.alloc<int32_t>(b.numPadded);
  auto *blockExpert = arena.alloc<int32_t>(b.numBlocks);
  auto *fill = arena.alloc<int32_t>(e);
  for (int64_t x = 0; x < e; ++x) {
    fill[x] = begin[x];
    for (int64_t i = begin[x] + count[x]; i < begin[x + 1]; ++i)
      sorted[i] = int32_t(b.numPairs);
    for (int64_t blk = begin[x] / bs; blk < begin[x + 1] / bs; ++blk)
      blockExpert[blk] = int32_t(x);
  }
  for (int64_t p = 0; p < b.numPairs; ++p)
    if (ids[p] >= 0)
      sorted[fill[ids[p]]++] = int32_t(p);

  b.sortedIds = sorted;
  b.blockExpert = blockExpert;
  b.expertCount = count;
  b.expertBegin = begin;
  return b;
}
