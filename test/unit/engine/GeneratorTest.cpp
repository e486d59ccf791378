//===- GeneratorTest.cpp - Prefill chunks, decode loop, perplexity --------===//

#include "runtime/engine/Generator.h"
#include "test/unit/engine/TinyArtifact.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <string>

namespace kiln::engine::test {
namespace {

std::unique_ptr<Model> load(const TinyModel &m, int threads = 2) {
  std::string path = tempPath("g.kiln");
  Status s = writeTinyArtifact(path, m);
  EXPECT_TRUE(s.isOk()) << s.toString();
  auto model = Model::load(path, threads);
  std::remove(path.c_str());
  EXPECT_TRUE(model.isOk()) << model.status().toString();
  return model.isOk() ? std::move(model).value() : nullptr;
}

const std::vector<int32_t> kPrompt = {4, 1, 9, 3, 3, 0, 6, 2, 5, 1, 1};

GenerateOptions greedy(int64_t n, int64_t chunk = kDefaultPrefillChunk) {
  GenerateOptions g;
  g.maxNewTokens = n;
  g.ignoreEos = true;
  g.prefillChunk = chunk;
  g.keepPromptLogits = true;
  return g;
}

TEST(GeneratorTest, ChunkedPrefillEqualsOneShot) {
  auto model = load(attentionModel());
  ASSERT_TRUE(model);
  auto one = generate(*model, kPrompt, greedy(12));
  ASSERT_TRUE(one.isOk()) << one.status().toString();
  ASSERT_EQ(one->tokens.size(), 12u);
  ASSERT_EQ(one->promptLogits.size(), 16u);
  for (int64_t chunk : {1, 2, 3, 5, 10}) {
    auto c = generate(*model, kPrompt, greedy(12, chunk));
    ASSERT_TRUE(c.isOk()) << c.status().toString();
    EXPECT_EQ(c->tokens, one->tokens) << "chunk " << chunk;
    for (int v = 0; v < 16; ++v)
      EXPECT_NEAR(c->promptLogits[v], one->promptLogits[v],
                  1e-6 * (1 + std::fabs(one->promptLogits[v])))
          << "chunk " << chunk;
  }
  // Every sequence was closed.
  EXPECT_EQ(model->sequenceLength(0), 0);
}

TEST(GeneratorTest, DecodeContinuesThePrefill) {
  // The logits after decoding token x at position n equal those of a
  // prefill of prompt + x.
  auto model = load(attentionModel());
  ASSERT_TRUE(model);
  auto r = generate(*model, kPrompt, greedy(2));
  ASSERT_TRUE(r.isOk());
  std::vector<int32_t> longer = kPrompt;
  longer.push_back(r->tokens[0]);
  auto again = generate(*model, longer, greedy(1));
  ASSERT_TRUE(again.isOk());
  EXPECT_EQ(again->tokens[0], r->tokens[1]);
}

/// The attention model on 1 and on `threads` threads: the same greedy
/// tokens and prompt logits, bit for bit.
void expectSameOnThreads(int threads) {
  auto one = load(attentionModel(), 1);
  auto many = load(attentionModel(), threads);
  ASSERT_TRUE(one && many);
  auto a = generate(*one, kPrompt, greedy(8));
  auto b = generate(*many, kPrompt, greedy(8));
  ASSERT_TRUE(a.isOk() && b.isOk());
  EXPECT_EQ(a->tokens, b->tokens);
  EXPECT_EQ(a->promptLogits, b->promptLogits);
}

TEST(GeneratorTest, ThreadCountDoesNotChangeResults) { expectSameOnThreads(4); }

// The same with the pool's default minimum work per chunk, whatever the
// environment says (ctest splits the unit tests as finely as it can): small
// dispatches then run on one thread, large ones split, same bits.
TEST(GeneratorTest, ThreadCountDoesNotChangeResultsAtTheDefaultChunkCost) {
  const char *before = std::getenv("KILN_MIN_CHUNK_COST");
  const std::string saved = before ? before : "";
  unsetenv("KILN_MIN_CHUNK_COST");
  expectSameOnThreads(2);
  if (before)
    setenv("KILN_MIN_CHUNK_COST", saved.c_str(), 1);
}

TEST(GeneratorTest, StopsAtStopIdsUnlessIgnored) {
  auto model = load(attentionModel());
  ASSERT_TRUE(model);
  auto free = generate(*model, kPrompt, greedy(6));
  ASSERT_TRUE(free.isOk());
  GenerateOptions g = greedy(6);
  g.ignoreEos = false;
  g.stopIds = {free->tokens[2]};
  auto stopped = generate(*model, kPrompt, g);
  ASSERT_TRUE(stopped.isOk());
  EXPECT_EQ(stopped->stop, StopReason::StopToken);
  size_t first =
      std::find(free->tokens.begin(), free->tokens.end(), free->tokens[2]) -
      free->tokens.begin();
  EXPECT_EQ(stopped->tokens,
            std::vector<int32_t>(free->tokens.begin(),
                                 free->tokens.begin() + first + 1));
  EXPECT_EQ(stopped->stats.generatedTokens, int64_t(first + 1));
  EXPECT_EQ(free->stop, StopReason::Length);
}

TEST(GeneratorTest, CallbackSeesEveryTokenAndCanStop) {
  auto model = load(attentionModel());
  ASSERT_TRUE(model);
  GenerateOptions g = greedy(10);
  std::vector<int32_t> seen;
  g.onToken = [&](int32_t id) {
    seen.push_back(id);
    return seen.size() < 4;
  };
  auto r = generate(*model, kPrompt, g);
  ASSERT_TRUE(r.isOk());
  EXPECT_EQ(r->stop, StopReason::Callback);
  EXPECT_EQ(seen, r->tokens);
  EXPECT_EQ(seen.size(), 4u);
}

TEST(GeneratorTest, StatsAndLimits) {
  auto model = load(attentionModel()); // max_position_embeddings 64
  ASSERT_TRUE(model);
  auto r = generate(*model, kPrompt, greedy(5));
  ASSERT_TRUE(r.isOk());
  EXPECT_EQ(r->stats.promptTokens, int64_t(kPrompt.size()));
  EXPECT_EQ(r->stats.generatedTokens, 5);
  EXPECT_GT(r->stats.ttftS, 0);
  EXPECT_GT(r->stats.prefillTokPerS, 0);
  EXPECT_GT(r->stats.decodeTokPerS, 0);

  auto none = generate(*model, kPrompt, greedy(0));
  ASSERT_TRUE(none.isOk());
  EXPECT_TRUE(none->tokens.empty());
  EXPECT_EQ(none->promptLogits.size(), 16u);

  auto tooLong = generate(*model, kPrompt, greedy(64));
  ASSERT_FALSE(tooLong.isOk());
  EXPECT_NE(tooLong.status().message().find("exceeds the model's 64"),
            std::string::npos);
  EXPECT_FALSE(generate(*model, {}, greedy(1)).isOk());
  GenerateOptions bad = greedy(1);
  bad.sampling.topP = 0;
  EXPECT_FALSE(generate(*model, kPrompt, bad).isOk());
}

TEST(GeneratorTest, SamplingIsSeeded) {
  auto model = load(attentionModel());
  ASSERT_TRUE(model);
  GenerateOptions g = greedy(16);
  g.sampling.temperature = 1.5f;
  g.sampling.seed = 11;
  auto a = generate(*model, kPrompt, g);
  auto b = generate(*model, kPrompt, g);
  ASSERT_TRUE(a.isOk() && b.isOk());
  EXPECT_EQ(a->tokens, b->tokens);
}

TEST(GeneratorTest, PrefillOnlyArtifactDecodesWithPrefill) {
  auto model = load(simpleModel({"prefill"}));
  ASSERT_TRUE(model);
  auto r = generate(*model, {1, 2, 3}, greedy(4));
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  EXPECT_EQ(r->tokens.size(), 4u);
}

// --- Perplexity ---------------------------------------------------------

TEST(PerplexityTest, TokenNll) {
  std::vector<float> logits = {0.0f, std::log(3.0f)};
  EXPECT_NEAR(tokenNll(logits.data(), 2, 1), -std::log(0.75), 1e-7);
  EXPECT_NEAR(tokenNll(logits.data(), 2, 0), -std::log(0.25), 1e-7);
  // Large logits do not overflow.
  std::vector<float> big = {1000.0f, 1000.0f};
  EXPECT_NEAR(tokenNll(big.data(), 2, 0), std::log(2.0), 1e-12);
}

TEST(PerplexityTest, WindowsAndMath) {
  const int64_t V = 5;
  std::vector<int32_t> tokens = {0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 1};
  // Uniform logits: ppl is exactly the vocabulary size.
  std::vector<std::pair<int64_t, int64_t>> calls;
  auto uniform = [&](const int32_t *w, int64_t n,
                     const LogitsRowFn &onRow) -> Status {
    calls.emplace_back(w - tokens.data(), n);
    std::vector<float> l(V, 0.0f);
    for (int64_t i = 0; i < n; ++i)
      onRow(i, l.data());
    return Status::ok();
  };
  auto r = perplexityOver(tokens, 4, V, uniform);
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  EXPECT_EQ(r->windows, 2); // the trailing 3 tokens are dropped
  EXPECT_EQ(r->tokens, 6);
  EXPECT_NEAR(r->ppl, 5.0, 1e-9);
  EXPECT_EQ(calls, (std::vector<std::pair<int64_t, int64_t>>{{0, 4}, {4, 4}}));

  // Row i puts logit 2 on the true next token: NLL = log(4 + e^2) - 2.
  auto oracle = [&](const int32_t *w, int64_t n,
                    const LogitsRowFn &onRow) -> Status {
    for (int64_t i = 0; i < n; ++i) {
      std::vector<float> l(V, 0.0f);
      if (i + 1 < n)
        l[w[i + 1]] = 2.0f;
      onRow(i, l.data());
    }
    return Status::ok();
  };
  r = perplexityOver(tokens, 4, V, oracle);
  ASSERT_TRUE(r.isOk());
  double nll = std::log(4 + std::exp(2.0)) - 2;
  EXPECT_NEAR(r->meanNll, nll, 1e-12);
  EXPECT_NEAR(r->ppl, std::exp(nll), 1e-9);

  // A text shorter than a window is one window.
  r = perplexityOver({1, 2, 3}, 256, V, uniform);
  ASSERT_TRUE(r.isOk());
  EXPECT_EQ(r->windows, 1);
  EXPECT_EQ(r->tokens, 2);

  EXPECT_FALSE(perplexityOver(tokens, 1, V, uniform).isOk());
  EXPECT_FALSE(perplexityOver({1}, 4, V, uniform).isOk());
  EXPECT_FALSE(perplexityOver({1, 7}, 4, V, uniform).isOk());
  auto failing = [](const int32_t *, int64_t, const LogitsRowFn &) {
    return Status(StatusCode::Internal, "boom");
  };
  auto f = perplexityOver(tokens, 4, V, failing);
  ASSERT_FALSE(f.isOk());
  EXPECT_NE(f.status().message().find("perplexity window 0: boom"),
            std::string::npos);
}

TEST(PerplexityTest, ModelPerplexityMatchesManualScoring) {
  auto model = load(attentionModel());
  ASSERT_TRUE(model);
  std::vector<int32_t> tokens;
  for (int i = 0; i < 23; ++i)
    tokens.push_back((i * 7 + 3) % 16);
  auto r = perplexity(*model, tokens, 8, /*chunk=*/3);
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  EXPECT_EQ(r->windows, 2);
  EXPECT_EQ(r->tokens, 14);
  // Each window by hand: one prefill run with logits at every row.
  double sum = 0;
  for (int w = 0; w < 2; ++w) {
    auto s = Session::open(*model);
    ASSERT_TRUE(s.isOk());
    std::vector<int32_t> seqs(8, s->id()), pos(8), rows(8);
    std::iota(pos.begin(), pos.end(), 0);
    std::iota(rows.begin(), rows.end(), 0);
    PlanInputs in;
    in.tokenIds = tokens.data() + 8 * w;
    in.seqIds = seqs.data();
    in.positions = pos.data();
    in.tokens = 8;
    in.logitRows = rows.data();
    in.logitCount = 8;
    auto out = model->run("prefill", in);
    ASSERT_TRUE(out.isOk());
    for (int i = 0; i < 7; ++i)
      sum += tokenNll(out->logits + i * 16, 16, tokens[8 * w + i + 1]);
  }
  EXPECT_NEAR(r->meanNll, sum / 14, 1e-6);
  EXPECT_NEAR(r->ppl, std::exp(sum / 14), 1e-5 * r->ppl);
}

} // namespace
} // namespace kiln::engine::test
