//===- MoeAlignTest.cpp - Grouping pairs into expert blocks ---------------===//

#include "runtime/cpu/Moe.h"
#include "test/unit/cpu/CpuTestUtil.h"

#include <gtest/gtest.h>

using namespace kiln::cpu;
using namespace kiln::cpu::test;

namespace {

std::vector<int32_t> vec(const int32_t *p, int64_t n) {
  return std::vector<int32_t>(p, p + n);
}

TEST(MoeAlign, VllmDocExample) {
  // The example in vLLM's moe_align_block_size docstring: experts 1..4 (0
  // unused), block size 4, padding value = numel = 12.
  const int32_t ids[] = {2, 3, 4, 1, 2, 4, 1, 3, 4, 1, 2, 3};
  MoeParams p;
  p.numExperts = 5;
  p.topK = 3;
  p.blockSize = 4;
  Arena arena;
  MoeBlocks b = alignBlocks(ids, 4, p, arena);
  EXPECT_EQ(b.numPairs, 12);
  EXPECT_EQ(b.numPadded, 16);
  EXPECT_EQ(b.numBlocks, 4);
  EXPECT_EQ(vec(b.sortedIds, 16),
            (std::vector<int32_t>{3, 6, 9, 12, 0, 4, 10, 12, 1, 7, 11, 12, 2, 5,
                                  8, 12}));
  EXPECT_EQ(vec(b.blockExpert, 4), (std::vector<int32_t>{1, 2, 3, 4}));
  EXPECT_EQ(vec(b.expertCount, 5), (std::vector<int32_t>{0, 3, 3, 3, 3}));
  EXPECT_EQ(vec(b.expertBegin, 6), (std::vector<int32_t>{0, 0, 4, 8, 12, 16}));
}

TEST(MoeAlign, InvariantsOnRandomRouting) {
  std::mt19937 rng(1);
  for (int64_t bs : {1, 3, 16, 64}) {
    MoeParams p;
    p.numExperts = 16;
    p.topK = 4;
    p.blockSize = bs;
    const int64_t T = 37;
    std::vector<int32_t> ids;
    for (int64_t t = 0; t < T; ++t) {
      std::vector<int32_t> all(16);
      for (int i = 0; i < 16; ++i)
        all[i] = i < 8 ? i : 0; // experts 8..15 never used
      std::shuffle(all.begin(), all.begin() + 8, rng);
      ids.insert(ids.end(), all.begin(), all.begin() + 4);
    }
    Arena arena;
    MoeBlocks b = alignBlocks(ids.data(), T, p, arena);
    ASSERT_EQ(b.numPadded % bs, 0);
    std::vector<int> seen(size_t(T * 4), 0);
    for (int64_t e = 0; e < 16; ++e) {
      const int64_t begin = b.expertBegin[e], count = b.expertCount[e];
      EXPECT_EQ(begin % bs, 0);
      EXPECT_EQ(b.expertBegin[e + 1] - begin, (count + bs - 1) / bs * bs);
      if (e >= 8)
        EXPECT_EQ(count, 0);
      for (int64_t i = begin; i < b.expertBegin[e + 1]; ++i) {
        EXPECT_EQ(b.blockExpert[i / bs], e);
        const int32_t pair = b.sortedIds[i];
        if (i - begin >= count) {
          EXPECT_EQ(pair, T * 4);
          continue;
        }
        EXPECT_EQ(ids[pair], e);
        if (i > begin)
          EXPECT_LT(b.sortedIds[i - 1], pair); // ascending within expert
        ++seen[pair];
      }
    }
    for (int s : seen)
      EXPECT_EQ(s, 1);
  }
}

} // namespace
