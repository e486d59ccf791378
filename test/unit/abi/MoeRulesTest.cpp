//===- MoeRulesTest.cpp - The one MoE routing rule -----------------------===//

#include "support/abi/MoeRules.h"

#include <gtest/gtest.h>

using namespace kiln::abi;

namespace {

std::string broken(MoeRouting r) {
  MoeRuleError e = checkMoeRouting(r);
  return e ? e.field + " " + e.message : "";
}

TEST(MoeRules, GlmSettingsPass) {
  // GLM-5.2: 256 experts, 8 per token, one group.
  EXPECT_EQ(broken({256, 8, 1, 1}), "");
  // DeepSeek-V3 style grouping: 8 groups, keep 4.
  EXPECT_EQ(broken({256, 8, 8, 4}), "");
  EXPECT_FALSE(checkMoeBlockSize(64));
}

TEST(MoeRules, EachRuleNamesItsField) {
  EXPECT_EQ(broken({4, 5, 1, 1}),
            "top_k must be in [1, 4] (the expert count), found 5");
  EXPECT_EQ(broken({4, 0, 1, 1}),
            "top_k must be in [1, 4] (the expert count), found 0");
  EXPECT_EQ(
      broken({4, 2, 3, 1}),
      "n_group must be positive and divide the expert count (4), found 3");
  EXPECT_EQ(broken({4, 2, 2, 3}),
            "topk_group must be in [1, 2] (n_group), found 3");
  // 8 groups of 32, keeping 1 group: at most 32 experts can be chosen.
  EXPECT_EQ(broken({256, 40, 8, 1}),
            "top_k 40 exceeds the 32 experts in topk_group groups");
  EXPECT_EQ(checkMoeBlockSize(0).message, "must be in [1, 4096], found 0");
  EXPECT_EQ(checkMoeBlockSize(4097).field, "block_size");
}

} // namespace
