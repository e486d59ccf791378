//===- GoldenTest.cpp - A compiled fixture against its golden outputs -----===//
//
// Runs only when KILN_GOLDEN_ARTIFACT names an artifact compiled from the
// fixture KILN_GOLDEN_FIXTURE (default glm5-tiny-dev), e.g.
//   kiln-compile test/fixtures/glm5-tiny-dev -o /tmp/m.kiln
//   KILN_GOLDEN_ARTIFACT=/tmp/m.kiln unit-engine --gtest_filter='Golden*'
// Checks last-position logits (relative L2), 64 greedy tokens and the
// perplexity of metrics.json (fixtures/README.md).
//
//===----------------------------------------------------------------------===//

#include "runtime/engine/Generator.h"
#include "runtime/support/Npy.h"
#include "test/unit/Fixtures.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdlib>
#include <fstream>

namespace kiln::engine {
namespace {

class GoldenTest : public ::testing::Test {
protected:
  void SetUp() override {
    const char *art = std::getenv("KILN_GOLDEN_ARTIFACT");
    if (!art || !*art)
      GTEST_SKIP() << "set KILN_GOLDEN_ARTIFACT to a compiled fixture";
    const char *fixture = std::getenv("KILN_GOLDEN_FIXTURE");
    golden_ = kilnFixture(
        std::string(fixture && *fixture ? fixture : "glm5-tiny-dev") +
        "/golden");
    auto m = Model::load(art, 2);
    ASSERT_TRUE(m.isOk()) << m.status().toString();
    model_ = std::move(m).value();
  }
  nlohmann::json json(const std::string &name) {
    std::ifstream in(golden_ + "/" + name);
    return nlohmann::json::parse(in);
  }
  std::string golden_;
  std::unique_ptr<Model> model_;
};

TEST_F(GoldenTest, LastLogitsAndGreedy) {
  nlohmann::json prompts = json("prompts.json");
  nlohmann::json greedy = json("greedy.json")["prompts"];
  auto last = readNpy(golden_ + "/last_logits.npy");
  ASSERT_TRUE(last.isOk()) << last.status().toString();
  const int64_t V = last->shape[1];
  for (size_t i = 0; i < prompts.size(); ++i) {
    std::vector<int32_t> ids = prompts[i]["token_ids"];
    GenerateOptions g;
    g.maxNewTokens = 64;
    g.ignoreEos = true;
    g.keepPromptLogits = true;
    auto r = generate(*model_, ids, g);
    ASSERT_TRUE(r.isOk()) << r.status().toString();
    const float *ref = last->as<float>() + i * V;
    double num = 0, den = 0;
    for (int64_t v = 0; v < V; ++v) {
      num += std::pow(double(r->promptLogits[v]) - ref[v], 2);
      den += double(ref[v]) * ref[v];
    }
    EXPECT_LT(std::sqrt(num / den), 1e-2) << prompts[i]["name"];
    EXPECT_EQ(r->tokens, greedy[i]["greedy_ids"].get<std::vector<int32_t>>())
        << prompts[i]["name"] << " (see fragility.json for near-ties)";
  }
}

TEST_F(GoldenTest, Perplexity) {
  auto tokens = readNpy(golden_ + "/eval_tokens.npy");
  ASSERT_TRUE(tokens.isOk());
  auto ids = tokens->toVector<int32_t>();
  ASSERT_TRUE(ids.isOk());
  auto r = perplexity(*model_, *ids, 256);
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  double expect = json("metrics.json")["ppl"];
  EXPECT_EQ(r->windows, 32);
  EXPECT_NEAR(r->ppl, expect, 1e-3 * expect);
}

} // namespace
} // namespace kiln::engine
