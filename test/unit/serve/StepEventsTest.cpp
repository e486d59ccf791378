//===- StepEventsTest.cpp - The events rank 0 sends the other ranks -------===//
//
// Every field of a request survives the trip (a field added to
// RequestParams and not to StepEvents.cpp fails the last test), and a cut or
// corrupted message is an error naming what was wrong, never a crash.
//
//===----------------------------------------------------------------------===//

#include "runtime/serve/StepEvents.h"

#include <gtest/gtest.h>

#include <limits>

using namespace kiln;
using namespace kiln::serve;

namespace {

RequestParams everyField(int seed) {
  RequestParams p;
  p.id = "req-" + std::to_string(seed) + std::string(13, 'x'); // > 8 bytes
  p.prompt = {seed, 7, 0, std::numeric_limits<int32_t>::max()};
  p.maxTokens = 1000 + seed;
  p.sampling.temperature = 0.7f + float(seed);
  p.sampling.topK = 40;
  p.sampling.topP = 0.95f;
  p.sampling.seed = std::numeric_limits<uint64_t>::max() - uint64_t(seed);
  p.stopIds = {2, 3};
  p.ignoreEos = true;
  p.stopStrings = {"\n\n", "", "a longer stop string"};
  p.returnPromptLogits = true;
  p.logprobs = 5;
  return p;
}

void expectSame(const RequestParams &a, const RequestParams &b) {
  EXPECT_EQ(a.id, b.id);
  EXPECT_EQ(a.prompt, b.prompt);
  EXPECT_EQ(a.maxTokens, b.maxTokens);
  EXPECT_EQ(a.sampling.temperature, b.sampling.temperature);
  EXPECT_EQ(a.sampling.topK, b.sampling.topK);
  EXPECT_EQ(a.sampling.topP, b.sampling.topP);
  EXPECT_EQ(a.sampling.seed, b.sampling.seed);
  EXPECT_EQ(a.stopIds, b.stopIds);
  EXPECT_EQ(a.ignoreEos, b.ignoreEos);
  EXPECT_EQ(a.stopStrings, b.stopStrings);
  EXPECT_EQ(a.returnPromptLogits, b.returnPromptLogits);
  EXPECT_EQ(a.logprobs, b.logprobs);
}

TEST(StepEvents, RoundTrip) {
  StepEvents e;
  e.submitted = {everyField(1), RequestParams{}, everyField(2)};
  e.cancelled = {4, 0, 99};
  e.placedOn = {1, 0, 3};
  e.loopIds = {7, 8, 1000};
  e.flushPrefixCache = true;
  e.step = true;
  Result<StepEvents> back = decodeStepEvents(encodeStepEvents(e));
  ASSERT_TRUE(back.isOk()) << back.status().message();
  ASSERT_EQ(back->submitted.size(), 3u);
  for (size_t i = 0; i < 3; ++i)
    expectSame(e.submitted[i], back->submitted[i]);
  EXPECT_EQ(back->cancelled, e.cancelled);
  EXPECT_EQ(back->placedOn, e.placedOn);
  EXPECT_EQ(back->loopIds, e.loopIds);
  EXPECT_TRUE(back->flushPrefixCache);
  EXPECT_TRUE(back->step);
  EXPECT_FALSE(back->stop);
}

TEST(StepEvents, HeartbeatAndStop) {
  Result<StepEvents> idle = decodeStepEvents(encodeStepEvents({}));
  ASSERT_TRUE(idle.isOk());
  EXPECT_TRUE(idle->submitted.empty() && idle->cancelled.empty());
  EXPECT_FALSE(idle->step || idle->stop || idle->flushPrefixCache);
  StepEvents stop;
  stop.stop = true;
  Result<StepEvents> back = decodeStepEvents(encodeStepEvents(stop));
  ASSERT_TRUE(back.isOk());
  EXPECT_TRUE(back->stop);
}

TEST(StepEvents, EveryCutIsAnError) {
  StepEvents e;
  e.submitted = {everyField(3)};
  e.cancelled = {1};
  std::vector<int64_t> words = encodeStepEvents(e);
  for (size_t n = 0; n < words.size(); ++n) {
    std::vector<int64_t> cut(words.begin(), words.begin() + n);
    Result<StepEvents> r = decodeStepEvents(cut);
    ASSERT_FALSE(r.isOk()) << "cut at " << n;
    EXPECT_NE(r.status().message().find("step events: "), std::string::npos);
  }
  words.push_back(0);
  Result<StepEvents> longer = decodeStepEvents(words);
  ASSERT_FALSE(longer.isOk());
  EXPECT_NE(longer.status().message().find("more than the message uses"),
            std::string::npos);
}

TEST(StepEvents, OutOfRangeCountsAreErrors) {
  StepEvents e;
  e.submitted = {everyField(4)};
  std::vector<int64_t> words = encodeStepEvents(e);
  std::vector<int64_t> bad = words;
  bad[0] = -1; // submitted count
  Result<StepEvents> r = decodeStepEvents(bad);
  ASSERT_FALSE(r.isOk());
  EXPECT_NE(r.status().message().find("count -1 of submitted requests"),
            std::string::npos)
      << r.status().message();
  bad = words;
  bad[1] = int64_t(1) << 40; // the id's length
  r = decodeStepEvents(bad);
  ASSERT_FALSE(r.isOk());
  EXPECT_NE(r.status().message().find("of request id is out of range"),
            std::string::npos)
      << r.status().message();
}

} // namespace
