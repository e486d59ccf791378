//===- ExpertExchangeMpiTest.cpp - dispatch_rows / combine_rows over MPI --===//
//
// Run by ctest under mpirun (-np 2 and 3). Rank r holds r + 2 rows (the
// last rank none in the idle case) of a random model every rank can rebuild,
// experts 2r and 2r + 1 of a router over 2R experts, top 2. Each rank
// recomputes every rank's routing on its own and checks what arrives: its
// own rows first (all of them with own_rows, else those routed to it), then
// each peer's rows routed to it, in rank and token order; the route records;
// then that combine_rows of parts p = (rank + 1) x row gives each row the
// sum of (d + 1) x row over the ranks d it went to, in rank order, bit for
// bit.
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/CommFactory.h"
#include "runtime/engine/ExpertExchange.h"
#include "test/unit/comm/MpiGtestMain.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

using namespace kiln;
using namespace kiln::engine;

namespace {

comm::Communicator *gComm = nullptr;

constexpr int64_t kWidth = 8, kTopK = 2, kPerRank = 2;

struct World {
  int ranks = 0;
  std::vector<float> router, bias;
  std::vector<std::vector<float>> rows; // per rank [T_r, kWidth]
  cpu::MoeParams routing;

  World(int ranks, bool lastIdle) : ranks(ranks) {
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    const int64_t e = kPerRank * ranks;
    router.resize(size_t(e * kWidth));
    for (float &v : router)
      v = u(rng);
    bias.assign(size_t(e), 0.0f);
    for (int r = 0; r < ranks; ++r) {
      int64_t t = lastIdle && r == ranks - 1 ? 0 : r + 2;
      rows.emplace_back(size_t(t * kWidth));
      for (float &v : rows.back())
        v = u(rng);
    }
    routing.numExperts = e;
    routing.topK = kTopK;
  }

  cpu::WeightView routerView() const {
    cpu::WeightView w;
    w.data = router.data();
    w.rows = kPerRank * ranks;
    w.cols = kWidth;
    return w;
  }

  int64_t tokens(int r) const {
    return int64_t(rows[size_t(r)].size()) / kWidth;
  }

  /// Whether row t of rank r goes to rank d.
  bool goesTo(int r, int64_t t, int d, bool ownRows) const {
    if (ownRows && d == r)
      return true;
    cpu::ThreadPool pool(1);
    cpu::Arena arena;
    std::vector<int32_t> ids(static_cast<size_t>(kTopK));
    std::vector<float> w(static_cast<size_t>(kTopK));
    cpu::route(pool, rows[size_t(r)].data() + t * kWidth, 1, routerView(),
               bias.data(), routing, arena, ids.data(), w.data());
    for (int32_t id : ids)
      if (id / kPerRank == d)
        return true;
    return false;
  }
};

void checkExchange(bool ownRows, bool lastIdle) {
  const int ranks = gComm->size(), me = gComm->rank();
  World world(ranks, lastIdle);
  const int64_t T = world.tokens(me);
  ExpertExchange::Dispatch d;
  d.x = world.rows[size_t(me)].data();
  d.tokens = T;
  d.width = kWidth;
  d.router = world.routerView();
  d.bias = world.bias.data();
  d.routing = world.routing;
  d.expertsPerRank = kPerRank;
  d.ownRows = ownRows;
  int64_t capacity = 0;
  for (int r = 0; r < ranks; ++r)
    capacity += world.tokens(r);
  std::vector<float> got(size_t(std::max<int64_t>(1, capacity) * kWidth));
  std::vector<int32_t> routes(size_t(std::max<int64_t>(1, T)));
  ExpertExchange x;
  cpu::ThreadPool pool(2);
  cpu::Arena arena;
  int64_t received = -1;
  Status st = x.dispatch(gComm, pool, arena, d, routes.data(), got.data(),
                         capacity, received);
  ASSERT_TRUE(st.isOk()) << st.toString();

  // What should arrive: own rows first, then each peer's, in order.
  std::vector<float> want;
  auto take = [&](int r) {
    for (int64_t t = 0; t < world.tokens(r); ++t)
      if (world.goesTo(r, t, me, ownRows))
        want.insert(want.end(), world.rows[size_t(r)].begin() + t * kWidth,
                    world.rows[size_t(r)].begin() + (t + 1) * kWidth);
  };
  take(me);
  for (int r = 0; r < ranks; ++r)
    if (r != me)
      take(r);
  ASSERT_EQ(received * kWidth, int64_t(want.size()));
  EXPECT_EQ(0, std::memcmp(got.data(), want.data(), want.size() * 4));
  for (int64_t t = 0; t < T; ++t)
    for (int r = 0; r < ranks; ++r)
      EXPECT_EQ(bool((routes[size_t(t)] >> r) & 1),
                world.goesTo(me, t, r, ownRows))
          << "row " << t << " rank " << r;

  // Parts back: (me + 1) x each received row.
  std::vector<float> parts(got.begin(), got.begin() + received * kWidth);
  for (float &v : parts)
    v *= float(me + 1);
  std::vector<float> out(size_t(std::max<int64_t>(1, T) * kWidth), -1.0f);
  st = x.combine(gComm, parts.data(), routes.data(), T, kWidth, arena,
                 out.data());
  ASSERT_TRUE(st.isOk()) << st.toString();
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < kWidth; ++i) {
      const float v = world.rows[size_t(me)][size_t(t * kWidth + i)];
      float sum = 0;
      bool first = true;
      for (int r = 0; r < ranks; ++r)
        if (world.goesTo(me, t, r, ownRows)) {
          sum = first ? v * float(r + 1) : sum + v * float(r + 1);
          first = false;
        }
      EXPECT_EQ(out[size_t(t * kWidth + i)], sum) << "row " << t;
    }
}

TEST(ExpertExchange, OwnRowsFirstThenEachPeersRowsAndTheirSumsBack) {
  checkExchange(/*ownRows=*/true, /*lastIdle=*/false);
}

TEST(ExpertExchange, OnlyRoutedRowsWithoutOwnRows) {
  checkExchange(/*ownRows=*/false, /*lastIdle=*/false);
}

TEST(ExpertExchange, AnIdleRankJoinsWithNoRows) {
  checkExchange(/*ownRows=*/true, /*lastIdle=*/true);
}

TEST(ExpertExchange, ACombineWithoutItsDispatchIsRefused) {
  ExpertExchange x;
  cpu::Arena arena;
  float part = 0, out = 0;
  int32_t route = 1;
  Status st = x.combine(gComm, &part, &route, 1, 1, arena, &out);
  ASSERT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("combine_rows: 1 rows, but the last "
                              "dispatch_rows had -1"),
            std::string::npos)
      << st.message();
}

} // namespace

int main(int argc, char **argv) {
  return kiln::comm::test::runOnEveryRank(argc, argv, "ExpertExchangeMpiTest",
                                          gComm);
}
