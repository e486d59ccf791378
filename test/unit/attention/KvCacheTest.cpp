//===- KvCacheTest.cpp - kvAppend/kvRead, PagedKvCache, Workspace ---------===//

#include "TestUtil.h"

using namespace kiln;
using namespace kiln::cpu;
using namespace kiln::cpu::test;

namespace {

TEST(KvCache, F32RoundTripAcrossPagesAndSequences) {
  PagedKvCache cache(5, CacheElem::F32, 3);
  ASSERT_TRUE(cache.ensure(0, 7).isOk());
  ASSERT_TRUE(cache.ensure(2, 4).isOk());
  std::mt19937 rng(1);
  // Interleaved tokens of two sequences, positions out of order.
  Tokens tok;
  for (int32_t p : {6, 0, 3, 1, 2, 5, 4})
    tok.add(0, p);
  for (int32_t p : {3, 0, 1, 2})
    tok.add(2, p);
  std::vector<float> rows = randomVector(rng, tok.size() * 5);
  kvAppend(cache.view(), tok.seq.data(), tok.pos.data(), tok.size(),
           rows.data());
  std::vector<float> read0(7 * 5), read2(4 * 5);
  kvRead(cache.view(), 0, 7, read0.data());
  kvRead(cache.view(), 2, 4, read2.data());
  for (int64_t t = 0; t < tok.size(); ++t) {
    const float *got =
        (tok.seq[t] == 0 ? read0 : read2).data() + tok.pos[t] * 5;
    for (int i = 0; i < 5; ++i)
      EXPECT_EQ(got[i], rows[t * 5 + i]) << "token " << t;
  }
  float cols[2];
  kvReadRow(cache.view(), 0, 4, 2, 2, cols);
  EXPECT_EQ(cols[0], rows[6 * 5 + 2]);
  EXPECT_EQ(cols[1], rows[6 * 5 + 3]);
  EXPECT_EQ(cache.rows(0), 7);
  EXPECT_EQ(cache.rows(1), 0);
  EXPECT_EQ(cache.pagesInUse(), 3 + 2);
}

TEST(KvCache, Bf16RoundsToNearestEven) {
  PagedKvCache cache(6, CacheElem::BF16, 4);
  ASSERT_TRUE(cache.ensure(0, 1).isOk());
  // BF16 keeps 8 significant bits: 1 + 2^-8 is halfway between 1 and
  // 1 + 2^-7 and goes to the even 1; 1 + 3 * 2^-8 goes to 1 + 2^-6.
  const float in[6] = {1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f,
                       1.0f + 0x1p-9f, -(1.0f + 0x1p-7f + 0x1p-10f),
                       0.0f,           3.0e38f};
  const float want[6] = {1.0f, 1.0f + 0x1p-6f,
                         1.0f, -(1.0f + 0x1p-7f),
                         0.0f, bf16ToFloat(floatToBf16(3.0e38f))};
  int32_t seq = 0, pos = 0;
  kvAppend(cache.view(), &seq, &pos, 1, in);
  float out[6];
  kvRead(cache.view(), 0, 1, out);
  for (int i = 0; i < 6; ++i)
    EXPECT_EQ(out[i], want[i]) << i;
}

TEST(PagedKvCache, MaxPagesIsResourceExhausted) {
  PagedKvCache cache(8, CacheElem::BF16, 16, /*maxPages=*/3);
  ASSERT_TRUE(cache.ensure(0, 32).isOk());
  Status s = cache.ensure(1, 17);
  EXPECT_EQ(s.code(), StatusCode::ResourceExhausted) << s.toString();
  EXPECT_NE(s.message().find("at most 3"), std::string::npos) << s.message();
  EXPECT_EQ(cache.rows(1), 0);
  EXPECT_TRUE(cache.ensure(1, 16).isOk());
  EXPECT_EQ(cache.pagesInUse(), 3);
}

TEST(PagedKvCache, TruncateRecyclesPages) {
  PagedKvCache cache(4, CacheElem::F32, 8, 4);
  ASSERT_TRUE(cache.ensure(0, 32).isOk());
  EXPECT_EQ(cache.pagesAllocated(), 4);
  cache.truncate(0, 9); // keeps pages 0 and 1
  EXPECT_EQ(cache.rows(0), 9);
  EXPECT_EQ(cache.pagesInUse(), 2);
  ASSERT_TRUE(cache.ensure(1, 16).isOk()); // reuses the freed pages
  EXPECT_EQ(cache.pagesAllocated(), 4);
  EXPECT_EQ(cache.ensure(0, 17).code(), StatusCode::ResourceExhausted);
  cache.truncate(0, 100); // longer than held: no-op
  EXPECT_EQ(cache.rows(0), 9);
  cache.truncate(0, 0);
  EXPECT_EQ(cache.pagesInUse(), 2);
}

TEST(PagedKvCache, BadArgumentsAreErrors) {
  PagedKvCache bad(0, CacheElem::F32, 16);
  EXPECT_EQ(bad.ensure(0, 1).code(), StatusCode::InvalidArgument);
  PagedKvCache cache(4, CacheElem::F32, 16);
  EXPECT_EQ(cache.ensure(-1, 1).code(), StatusCode::OutOfRange);
  EXPECT_EQ(cache.ensure(PagedKvCache::kMaxSequences, 1).code(),
            StatusCode::OutOfRange);
  EXPECT_EQ(cache.ensure(0, -5).code(), StatusCode::OutOfRange);
  EXPECT_EQ(cache.ensure(0, int64_t(1) << 40).code(), StatusCode::OutOfRange);
}

TEST(Workspace, ReserveGrowsAndAligns) {
  Workspace ws;
  EXPECT_EQ(ws.size(), 0u);
  ASSERT_TRUE(ws.reserve(100).isOk());
  EXPECT_GE(ws.size(), 100u);
  uint8_t *p = ws.get(50);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % Workspace::kAlign, 0u);
  EXPECT_EQ(ws.get(64), p); // no regrowth within the reservation
  EXPECT_GE(ws.size(), 100u);
}

} // namespace
