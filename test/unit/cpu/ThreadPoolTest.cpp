//===- ThreadPoolTest.cpp - Coverage, wake-ups and shutdown of ThreadPool -===//

#include "runtime/cpu/ThreadPool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <string>
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

namespace {

/// The chunks of one costed parallelFor, as (begin, end).
std::vector<std::pair<int64_t, int64_t>>
costedChunks(ThreadPool &pool, int64_t n, int64_t grain, int64_t unitCost) {
  std::mutex m;
  std::vector<std::pair<int64_t, int64_t>> chunks;
  pool.parallelFor(
      n,
      [&](int64_t b, int64_t e, int) {
        std::lock_guard<std::mutex> lock(m);
        chunks.emplace_back(b, e);
      },
      grain, unitCost);
  std::sort(chunks.begin(), chunks.end());
  return chunks;
}

// A costed parallelFor gives every chunk but the last at least
// minChunkCost() of work, in whole grains: a dispatch below it runs as one
// chunk on the caller; a large one still splits; every index once.
TEST(ThreadPool, CostedChunksCarryTheMinimumWork) {
  PoolOptions options;
  options.minChunkCost = ThreadPool::kDefaultMinChunkCost;
  ThreadPool pool(2, options);
  const int64_t min = pool.minChunkCost();
  ASSERT_EQ(min, ThreadPool::kDefaultMinChunkCost);
  // 256 rows of a 256-column GEMV for one token: 65,536 multiply-adds.
  auto small = costedChunks(pool, 256, 32, min / 256);
  ASSERT_EQ(small.size(), 1u);
  EXPECT_EQ(small[0], std::make_pair(int64_t(0), int64_t(256)));
  // Without a cost the same call splits.
  EXPECT_GT(costedChunks(pool, 256, 32, 0).size(), 1u);
  // 64x the minimum in 4,096 rows: split, each chunk a whole number of
  // 32-row grains holding at least the minimum.
  const int64_t unit = 64 * min / 4096;
  auto large = costedChunks(pool, 4096, 32, unit);
  ASSERT_GT(large.size(), 1u);
  int64_t next = 0;
  for (size_t i = 0; i < large.size(); ++i) {
    EXPECT_EQ(large[i].first, next);
    EXPECT_EQ(large[i].first % 32, 0);
    if (i + 1 < large.size())
      EXPECT_GE((large[i].second - large[i].first) * unit, min);
    next = large[i].second;
  }
  EXPECT_EQ(next, 4096);
}

// threadsFor: one thread per minChunkCost() of work, 1 to size(); every
// thread when the minimum is 0.
TEST(ThreadPool, ThreadsForTheWork) {
  PoolOptions options;
  options.minChunkCost = 1000;
  ThreadPool pool(3, options);
  EXPECT_EQ(pool.threadsFor(0), 1);
  EXPECT_EQ(pool.threadsFor(999), 1);
  EXPECT_EQ(pool.threadsFor(2000), 2);
  EXPECT_EQ(pool.threadsFor(1 << 30), 3);
  options.minChunkCost = 0;
  EXPECT_EQ(ThreadPool(3, options).threadsFor(1), 3);
}

// $KILN_MIN_CHUNK_COST sets the minimum; 0 turns it off; a bad value is
// ignored; an explicit option wins.
TEST(ThreadPool, MinimumChunkCostFromTheEnvironment) {
  const char *before = std::getenv("KILN_MIN_CHUNK_COST");
  const std::string saved = before ? before : "";
  ASSERT_EQ(setenv("KILN_MIN_CHUNK_COST", "1000", 1), 0);
  PoolOptions explicitCost;
  explicitCost.minChunkCost = 5;
  EXPECT_EQ(ThreadPool(1, explicitCost).minChunkCost(), 5);
  EXPECT_EQ(ThreadPool(1).minChunkCost(), 1000);
  ASSERT_EQ(setenv("KILN_MIN_CHUNK_COST", "0", 1), 0);
  ThreadPool off(2);
  EXPECT_EQ(off.minChunkCost(), 0);
  EXPECT_GT(costedChunks(off, 256, 32, 1).size(), 1u);
  for (const char *bad : {"x", "5k", "-1", ""}) {
    ASSERT_EQ(setenv("KILN_MIN_CHUNK_COST", bad, 1), 0);
    EXPECT_EQ(ThreadPool(1).minChunkCost(), ThreadPool::kDefaultMinChunkCost)
        << "'" << bad << "'";
  }
  unsetenv("KILN_MIN_CHUNK_COST");
  EXPECT_EQ(ThreadPool(1).minChunkCost(), ThreadPool::kDefaultMinChunkCost);
  if (before)
    setenv("KILN_MIN_CHUNK_COST", saved.c_str(), 1);
}

} // namespace
