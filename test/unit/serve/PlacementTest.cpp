//===- PlacementTest.cpp - Data-parallel placement by tokens held ---------===//

#include "runtime/serve/Placement.h"

#include <gtest/gtest.h>

using namespace kiln::serve;

TEST(Placement, FewestTokensWins) {
  EXPECT_EQ(leastLoadedGroup({900, 40, 300}, 0), 1);
  EXPECT_EQ(leastLoadedGroup({900, 40, 300}, 1), 1);
  EXPECT_EQ(leastLoadedGroup({5, 40, 300}, 2), 0);
}

TEST(Placement, TiesTakeTurns) {
  // Equal groups: the first after the last placed, wrapping around.
  EXPECT_EQ(leastLoadedGroup({0, 0, 0}, 0), 1);
  EXPECT_EQ(leastLoadedGroup({0, 0, 0}, 1), 2);
  EXPECT_EQ(leastLoadedGroup({0, 0, 0}, 2), 0);
  EXPECT_EQ(leastLoadedGroup({7, 3, 3}, 1), 2);
  EXPECT_EQ(leastLoadedGroup({7}, 0), 0);
}

// A long prompt counts for what it holds: the short requests that follow go
// to the other group until it holds as many tokens, where placing by request
// count would have alternated.
TEST(Placement, ALongPromptWeighsAsItsTokens) {
  std::vector<int64_t> tokens = {0, 0};
  int last = 1;
  auto place = [&](int64_t promptTokens) {
    last = leastLoadedGroup(tokens, last);
    tokens[size_t(last)] += promptTokens;
    return last;
  };
  EXPECT_EQ(place(20000), 0);
  for (int i = 0; i < 20; ++i)
    EXPECT_EQ(place(1000), 1) << "request " << i;
  // 20,000 each: a tie, and group 1 was placed last.
  EXPECT_EQ(place(1000), 0);
  EXPECT_EQ(place(1000), 1);
}
