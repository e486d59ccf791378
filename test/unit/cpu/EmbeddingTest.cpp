//===- EmbeddingTest.cpp - Rows of an embedding table ---------------------===//

#include "runtime/cpu/Embedding.h"
#include "test/unit/cpu/CpuTestUtil.h"

#include <gtest/gtest.h>

using namespace kiln::cpu;
using namespace kiln::cpu::test;

namespace {

TEST(Embedding, RowsOfEveryFormat) {
  std::mt19937 rng(1);
  for (WeightFormat f : {WeightFormat::F32, WeightFormat::BF16,
                         WeightFormat::FP8, WeightFormat::MXFP4}) {
    TestWeight table = randomWeight(rng, f, 300, 64);
    const std::vector<float> full = table.dequantized();
    const int32_t ids[] = {0, 299, 17, 17, 200};
    std::vector<float> y(5 * 64);
    embedding(table.view, ids, 5, y.data());
    for (int t = 0; t < 5; ++t)
      for (int i = 0; i < 64; ++i)
        EXPECT_EQ(y[t * 64 + i], full[ids[t] * 64 + i]) << formatName(f);
  }
}

} // namespace
