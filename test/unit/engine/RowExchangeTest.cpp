//===- RowExchangeTest.cpp - Who sends which rows, without MPI ------------===//
//
// The counts the CPU ranks (PlanRunner) and the GPU ranks (HipPlanDevice)
// both exchange under data-parallel attention: three groups of two ranks
// (tensor parallelism 2 inside each) with 3, 0 and 2 tokens, rows of 4.
//
//===----------------------------------------------------------------------===//

#include "runtime/engine/RowExchange.h"

#include <gtest/gtest.h>

using namespace kiln;
using namespace kiln::engine;

namespace {

const std::vector<int64_t> kTokens = {3, 3, 0, 0, 2, 2};
constexpr size_t kWidth = 4;

RowExchange exchange() {
  Result<RowExchange> x = RowExchange::create(kTokens, 2, 2);
  EXPECT_TRUE(x.isOk()) << x.status().message();
  return std::move(x).value();
}

} // namespace

TEST(RowExchange, GatheredRowsCountEachGroupOnce) {
  EXPECT_EQ(RowExchange::gatheredRows(kTokens, 2), 5);
  EXPECT_EQ(RowExchange::gatheredRows({1, 4, 0}, 1), 5);
}

TEST(RowExchange, TheFirstRankOfEachGroupSendsItsRows) {
  RowExchange x = exchange();
  EXPECT_EQ(x.gatherCounts(kWidth), (comm::Counts{12, 0, 0, 0, 8, 0}));
  EXPECT_EQ(x.gatherSend(0, kWidth), 12u);
  EXPECT_EQ(x.gatherSend(1, kWidth), 0u);
  EXPECT_EQ(x.gatherSend(4, kWidth), 8u);
  EXPECT_EQ(x.gatherSend(5, kWidth), 0u);
}

TEST(RowExchange, AGroupSumsItsOwnConsecutiveParts) {
  RowExchange x = exchange();
  size_t total = 0;
  EXPECT_EQ(x.partCounts(kWidth, total), (comm::Counts{12, 12, 0, 0, 8, 8}));
  EXPECT_EQ(total, 40u);
  // Group 2's parts (ranks 4 and 5) follow groups 0 and 1's.
  EXPECT_EQ(x.groupPartsOffset(4, kWidth), 24u);
  EXPECT_EQ(x.groupPartsOffset(5, kWidth), 24u);
  EXPECT_EQ(x.groupPartsOffset(1, kWidth), 0u);
  EXPECT_EQ(x.groupSize(), 2);
}

TEST(RowExchange, EachPeerGetsItsGroupsRowsOfThePartialResult) {
  RowExchange x = exchange();
  comm::Counts sendCounts, sendDispls, recvCounts, recvDispls;
  // Rank 4 runs 2 tokens: 8 floats.
  x.scatterCounts(kWidth, 8, sendCounts, sendDispls, recvCounts, recvDispls);
  EXPECT_EQ(sendCounts, (comm::Counts{12, 12, 0, 0, 8, 8}));
  EXPECT_EQ(sendDispls, (comm::Counts{0, 0, 12, 12, 12, 12}));
  EXPECT_EQ(recvCounts, (comm::Counts(6, 8)));
  EXPECT_EQ(recvDispls, (comm::Counts{0, 8, 16, 24, 32, 40}));
}

TEST(RowExchange, RefusesGroupsThatDoNotMatchThePlan) {
  Result<RowExchange> declared = RowExchange::create(kTokens, 2, 1);
  ASSERT_FALSE(declared.isOk());
  EXPECT_NE(declared.status().message().find(
                "exchanges rows in groups of 1 ranks, but the artifact's "
                "data-parallel groups have 2 of 6"),
            std::string::npos)
      << declared.status().message();
  Result<RowExchange> uneven = RowExchange::create({3, 2, 0, 0}, 2, 2);
  ASSERT_FALSE(uneven.isOk());
  EXPECT_NE(uneven.status().message().find(
                "ranks 0 and 1 of one data-parallel group run 3 and 2 tokens"),
            std::string::npos)
      << uneven.status().message();
}
