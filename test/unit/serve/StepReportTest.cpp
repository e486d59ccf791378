//===- StepReportTest.cpp - What a data-parallel rank sends rank 0 --------===//
//
// Every field of a finished request and of a token event survives the trip
// (a field added to RequestOutput and not to StepReport.cpp fails the
// round trip), a cut or padded message is an error naming what was wrong,
// and addMetrics sums every counter but the steps.
//
//===----------------------------------------------------------------------===//

#include "runtime/serve/StepReport.h"

#include <gtest/gtest.h>

using namespace kiln;
using namespace kiln::serve;

namespace {

RequestOutput everyField(int seed) {
  RequestOutput o;
  o.request = 40 + seed;
  o.id = "request-" + std::to_string(seed) + "-with-a-long-label";
  o.prompt = {1, 2, seed};
  o.ids = {5, 6, 7, seed};
  o.text = "generated text " + std::to_string(seed);
  o.finish = FinishReason::Stop;
  o.error = seed == 2 ? "an error message" : "";
  o.cachedTokens = 64;
  o.preemptions = 2;
  o.queueS = 0.125;
  o.ttftS = 0.25 + seed;
  o.e2eS = 1.5;
  o.interTokenS = {0.01, 0.0, 0.02};
  o.specReached = {3, 2, 1};
  o.specAccepted = {2, 1, 0};
  o.promptLogits = {-1.5f, 0.0f, 2.25f};
  o.logprobs = {{-0.5f, {{5, -0.5f}, {9, -1.25f}}}, {-2.0f, {}}};
  return o;
}

void expectSame(const RequestOutput &a, const RequestOutput &b) {
  EXPECT_EQ(a.request, b.request);
  EXPECT_EQ(a.id, b.id);
  EXPECT_EQ(a.prompt, b.prompt);
  EXPECT_EQ(a.ids, b.ids);
  EXPECT_EQ(a.text, b.text);
  EXPECT_EQ(a.finish, b.finish);
  EXPECT_EQ(a.error, b.error);
  EXPECT_EQ(a.cachedTokens, b.cachedTokens);
  EXPECT_EQ(a.preemptions, b.preemptions);
  EXPECT_EQ(a.queueS, b.queueS);
  EXPECT_EQ(a.ttftS, b.ttftS);
  EXPECT_EQ(a.e2eS, b.e2eS);
  EXPECT_EQ(a.interTokenS, b.interTokenS);
  EXPECT_EQ(a.specReached, b.specReached);
  EXPECT_EQ(a.specAccepted, b.specAccepted);
  EXPECT_EQ(a.promptLogits, b.promptLogits);
  ASSERT_EQ(a.logprobs.size(), b.logprobs.size());
  for (size_t i = 0; i < a.logprobs.size(); ++i) {
    EXPECT_EQ(a.logprobs[i].logprob, b.logprobs[i].logprob);
    EXPECT_EQ(a.logprobs[i].top, b.logprobs[i].top);
  }
}

StepReport sample() {
  StepReport r;
  StepReport::Token plain;
  plain.loop = 3;
  plain.token = 11;
  StepReport::Token scored;
  scored.loop = 4;
  scored.token = 12;
  scored.hasLogprob = true;
  scored.logprob = {-0.75f, {{12, -0.75f}, {2, -3.0f}}};
  r.tokens = {plain, scored};
  r.finished = {everyField(1), everyField(2)};
  r.hasWork = true;
  r.metrics.running = 2;
  r.metrics.generatedTokens = 77;
  r.metrics.specReachedAt = {5, 4};
  return r;
}

TEST(StepReport, RoundTrip) {
  StepReport r = sample();
  Result<StepReport> back = decodeStepReport(encodeStepReport(r));
  ASSERT_TRUE(back.isOk()) << back.status().message();
  ASSERT_EQ(back->tokens.size(), 2u);
  EXPECT_EQ(back->tokens[0].loop, 3);
  EXPECT_EQ(back->tokens[0].token, 11);
  EXPECT_FALSE(back->tokens[0].hasLogprob);
  EXPECT_TRUE(back->tokens[1].hasLogprob);
  EXPECT_EQ(back->tokens[1].logprob.logprob, -0.75f);
  EXPECT_EQ(back->tokens[1].logprob.top, r.tokens[1].logprob.top);
  ASSERT_EQ(back->finished.size(), 2u);
  for (size_t i = 0; i < 2; ++i)
    expectSame(r.finished[i], back->finished[i]);
  EXPECT_TRUE(back->hasWork);
  EXPECT_EQ(back->metrics.running, 2);
  EXPECT_EQ(back->metrics.generatedTokens, 77);
  EXPECT_EQ(back->metrics.specReachedAt, r.metrics.specReachedAt);
}

TEST(StepReport, EveryCutIsAnError) {
  std::vector<int64_t> words = encodeStepReport(sample());
  for (size_t n = 0; n < words.size(); ++n) {
    std::vector<int64_t> cut(words.begin(), words.begin() + n);
    Result<StepReport> r = decodeStepReport(cut);
    ASSERT_FALSE(r.isOk()) << "cut at " << n;
    EXPECT_NE(r.status().message().find("step report: "), std::string::npos);
  }
  words.push_back(0);
  Result<StepReport> longer = decodeStepReport(words);
  ASSERT_FALSE(longer.isOk());
  EXPECT_NE(longer.status().message().find("more than the message uses"),
            std::string::npos);
}

TEST(StepReport, AddMetricsSumsAllButSteps) {
  EngineMetrics a, b;
  a.steps = 10;
  a.running = 1;
  a.pagesUsed = 5;
  a.specAcceptedAt = {1};
  b.steps = 12;
  b.running = 2;
  b.pagesUsed = 7;
  b.specAccepted = 3;
  b.specAcceptedAt = {2, 4};
  addMetrics(a, b);
  EXPECT_EQ(a.steps, 10);
  EXPECT_EQ(a.running, 3);
  EXPECT_EQ(a.pagesUsed, 12);
  EXPECT_EQ(a.specAccepted, 3);
  EXPECT_EQ(a.specAcceptedAt, (std::vector<int64_t>{3, 4}));
}

} // namespace
