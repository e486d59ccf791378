//===- RankSyncMpiTest.cpp - Rank 0's step events across real ranks -------===//
//
// Runs under mpirun (ctest serve.ranksync.np2, .np3): every rank runs every
// test. What rank 0 publishes arrives whole on every other rank, in order,
// heartbeats and the stop included; a message size no rank 0 would send is
// an error naming it; a rank whose engine counters differ from rank 0's is
// named, the same on every rank.
//
//===----------------------------------------------------------------------===//

#include "runtime/serve/RankSync.h"
#include "test/unit/comm/MpiGtestMain.h"

#include <gtest/gtest.h>

#include <array>

using namespace kiln;
using namespace kiln::serve;

namespace {

comm::Communicator *gComm = nullptr;

RequestParams request(int i) {
  RequestParams p;
  p.id = "request number " + std::to_string(i);
  p.prompt = {i, 2 * i, 3 * i};
  p.maxTokens = 10 + i;
  p.sampling.temperature = 0.5f;
  p.sampling.seed = 1000 + uint64_t(i);
  p.stopStrings = {"\n", "end"};
  p.logprobs = i;
  return p;
}

TEST(RankSync, EventsArriveWholeAndInOrder) {
  RankSync sync(*gComm);
  StepEvents first;
  first.submitted = {request(1), request(2)};
  first.cancelled = {7};
  first.step = true;
  StepEvents stop;
  stop.stop = true;
  if (gComm->rank() == 0) {
    StepEvents heartbeat;
    for (StepEvents *e : {&first, &heartbeat, &stop})
      ASSERT_TRUE(sync.publish(*e).isOk());
    return;
  }
  Result<StepEvents> got = sync.receive();
  ASSERT_TRUE(got.isOk()) << got.status().message();
  ASSERT_EQ(got->submitted.size(), 2u);
  for (int i = 0; i < 2; ++i) {
    const RequestParams &p = got->submitted[size_t(i)], want = request(i + 1);
    EXPECT_EQ(p.id, want.id);
    EXPECT_EQ(p.prompt, want.prompt);
    EXPECT_EQ(p.maxTokens, want.maxTokens);
    EXPECT_EQ(p.sampling.seed, want.sampling.seed);
    EXPECT_EQ(p.stopStrings, want.stopStrings);
    EXPECT_EQ(p.logprobs, want.logprobs);
  }
  EXPECT_EQ(got->cancelled, first.cancelled);
  EXPECT_TRUE(got->step);
  Result<StepEvents> heartbeat = sync.receive();
  ASSERT_TRUE(heartbeat.isOk());
  EXPECT_TRUE(heartbeat->submitted.empty());
  EXPECT_FALSE(heartbeat->step || heartbeat->stop);
  Result<StepEvents> last = sync.receive();
  ASSERT_TRUE(last.isOk());
  EXPECT_TRUE(last->stop);
}

TEST(RankSync, ABadMessageSizeIsRefused) {
  RankSync sync(*gComm);
  if (gComm->rank() == 0) {
    std::array<int64_t, 1> size = {-5};
    ASSERT_TRUE(gComm->broadcast(size, 0).isOk());
    return;
  }
  Result<StepEvents> got = sync.receive();
  ASSERT_FALSE(got.isOk());
  EXPECT_NE(got.status().message().find("step events of -5 words from rank 0"),
            std::string::npos)
      << got.status().message();
}

TEST(RankSync, AgreeNamesTheRankThatDiffers) {
  RankSync sync(*gComm);
  EngineMetrics m;
  m.steps = 12;
  m.running = 3;
  m.generatedTokens = 40;
  Status same = sync.agree(m);
  EXPECT_TRUE(same.isOk()) << same.message();
  // The last rank ran a step the others did not.
  const int odd = gComm->size() - 1;
  if (gComm->rank() == odd)
    ++m.steps;
  Status differs = sync.agree(m);
  ASSERT_FALSE(differs.isOk());
  EXPECT_NE(differs.message().find("the engine of rank " + std::to_string(odd) +
                                   " no longer schedules as rank 0's"),
            std::string::npos)
      << differs.message();
}

} // namespace

int main(int argc, char **argv) {
  return kiln::comm::test::runOnEveryRank(argc, argv, "unit-ranksync-mpi",
                                          gComm);
}
