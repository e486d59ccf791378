//===- ThreadPoolTest.cpp - Coverage, wake-ups and shutdown of ThreadPool -===//

#include "runtime/cpu/ThreadPool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <thread>
#include <vector>

using namespace kiln::cpu;

namespace {

/// Runs one parallelFor and checks that every index in [0, n) was visited
/// exactly once, by chunks that respect the grain.
void expectCovered(ThreadPool &pool, int64_t n, int64_t grain) {
  std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
  std::atomic<int> badChunk{0};
  pool.parallelFor(
      n,
      [&](int64_t b, int64_t e, int worker) {
        if (worker < 0 || worker >= pool.size() || b >= e || (b % grain != 0) ||
            (e != n && e % grain != 0))
          badChunk.fetch_add(1);
        for (int64_t i = b; i < e; ++i)
          hits[size_t(i)].fetch_add(1);
      },
      grain);
  EXPECT_EQ(badChunk.load(), 0) << "n " << n << " grain " << grain;
  for (int64_t i = 0; i < n; ++i)
    ASSERT_EQ(hits[size_t(i)].load(), 1) << "index " << i << " of " << n;
}

TEST(ThreadPool, EveryIndexOnceForAnySizeAndGrain) {
  for (int threads : {1, 2, 3, 5}) {
    ThreadPool pool(threads);
    for (int64_t n : {1, 2, 3, 7, 31, 32, 33, 100, 1000})
      for (int64_t grain : {1, 4, 32})
        expectCovered(pool, n, grain);
  }
}

TEST(ThreadPool, ZeroAndNegativeSizesRunNothing) {
  ThreadPool pool(2);
  int calls = 0;
  pool.parallelFor(0, [&](int64_t, int64_t, int) { ++calls; });
  pool.parallelFor(-5, [&](int64_t, int64_t, int) { ++calls; });
  EXPECT_EQ(calls, 0);
}

// Callers carve scratch space by worker index: one worker index never runs
// two chunks at once, and every index is below size().
TEST(ThreadPool, AWorkerIndexRunsOneChunkAtATime) {
  ThreadPool pool(4);
  std::vector<std::atomic<int>> inside(4);
  std::atomic<int> overlaps{0}, outOfRange{0}, chunks{0};
  for (int round = 0; round < 50; ++round)
    pool.parallelFor(64, [&](int64_t, int64_t, int w) {
      if (w < 0 || w >= 4) {
        outOfRange++;
        return;
      }
      if (inside[size_t(w)].exchange(1))
        overlaps++;
      chunks++;
      std::this_thread::sleep_for(std::chrono::microseconds(20));
      inside[size_t(w)].store(0);
    });
  EXPECT_EQ(outOfRange.load(), 0);
  EXPECT_EQ(overlaps.load(), 0);
  EXPECT_GE(chunks.load(), 50 * 4) << "a few chunks per thread";
}

// Back-to-back dispatches (the spinning path) and dispatches that find every
// worker asleep (spin budget 0: each one goes through the futex).
TEST(ThreadPool, ManyDispatchesSpinningAndSleeping) {
  for (int spin : {ThreadPool::kDefaultSpinMicros, 0}) {
    PoolOptions options;
    options.spinMicros = spin;
    ThreadPool pool(3, options);
    EXPECT_EQ(pool.spinMicros(), spin);
    int64_t sum = 0;
    for (int round = 0; round < 5000; ++round) {
      std::atomic<int64_t> s{0};
      pool.parallelFor(30, [&](int64_t b, int64_t e, int) {
        for (int64_t i = b; i < e; ++i)
          s.fetch_add(i + round);
      });
      sum += s.load();
    }
    int64_t expect = 0;
    for (int round = 0; round < 5000; ++round)
      expect += 435 + 30 * int64_t(round);
    EXPECT_EQ(sum, expect) << "spin " << spin;
  }
}

// Workers that went to sleep after their spin budget wake for the next
// dispatch, and a caller that slept waiting for a slow worker wakes too.
TEST(ThreadPool, WakesAfterIdleAndAfterSlowWorkers) {
  PoolOptions options;
  options.spinMicros = 50;
  ThreadPool pool(2, options);
  for (int round = 0; round < 20; ++round) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    std::atomic<int> done{0};
    pool.parallelFor(2, [&](int64_t b, int64_t, int) {
      if (b == 1)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      done++;
    });
    ASSERT_EQ(done.load(), 2) << "round " << round;
  }
}

TEST(ThreadPool, MoreThreadsThanCpusStillFinish) {
  ThreadPool pool(availableCpus() * 4);
  EXPECT_GT(pool.spinMicros(), -1);
  for (int round = 0; round < 200; ++round)
    expectCovered(pool, 1000, 8);
}

TEST(ThreadPool, DestroysWhileWorkersSleep) {
  PoolOptions options;
  options.spinMicros = 0;
  auto pool = std::make_unique<ThreadPool>(4, options);
  pool->parallelFor(4, [](int64_t, int64_t, int) {});
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  pool.reset(); // joins: a lost wake-up would hang here
  SUCCEED();
}

TEST(ThreadPool, PinningWithinTheAffinityMask) {
  PoolOptions options;
  options.pinThreads = true;
  ThreadPool fits(availableCpus(), options);
  EXPECT_EQ(fits.pinError(), "");
  expectCovered(fits, 100, 1);

  ThreadPool tooMany(availableCpus() + 1, options);
  EXPECT_NE(
      tooMany.pinError().find(std::to_string(availableCpus() + 1) + " threads"),
      std::string::npos)
      << tooMany.pinError();
  expectCovered(tooMany, 100, 1);
}

} // namespace

namespace {

// $KILN_SPIN_US sets the default spin budget; a value that is not a whole
// number of microseconds in [0, 1e6] is ignored. An explicit option wins.
TEST(ThreadPool, SpinBudgetFromTheEnvironment) {
  ASSERT_EQ(setenv("KILN_SPIN_US", "7", 1), 0);
  EXPECT_EQ(ThreadPool(1).spinMicros(), 7);
  PoolOptions explicitSpin;
  explicitSpin.spinMicros = 3;
  EXPECT_EQ(ThreadPool(1, explicitSpin).spinMicros(), 3);
  for (const char *bad : {"x", "7us", "-1", "2000000", ""}) {
    ASSERT_EQ(setenv("KILN_SPIN_US", bad, 1), 0);
    EXPECT_EQ(ThreadPool(1).spinMicros(), ThreadPool::kDefaultSpinMicros)
        << "'" << bad << "'";
  }
  unsetenv("KILN_SPIN_US");
  EXPECT_EQ(ThreadPool(1).spinMicros(), ThreadPool::kDefaultSpinMicros);
}

} // namespace
