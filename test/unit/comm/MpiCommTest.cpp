//===- MpiCommTest.cpp - Every collective across MPI ranks ----------------===//
//
// Run by ctest under mpirun (-np 2 and -np 4), every rank the same tests
// (MpiGtestMain.h).
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/CommFactory.h"
#include "test/unit/ExpectStatus.h"
#include "test/unit/comm/MpiGtestMain.h"

#include <gtest/gtest.h>

#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

using namespace kiln;
using namespace kiln::comm;

namespace {

Communicator *gComm = nullptr;

/// Rank r's contribution at element i: signs and magnitudes spread over
/// 2^-10 .. 2^20, so that the order of the additions changes the float sum.
float contribution(int r, size_t i) {
  uint64_t x = uint64_t(r) * 0x9E3779B97F4A7C15ull + i * 0xBF58476D1CE4E5B9ull;
  x ^= x >> 31;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 29;
  float mantissa = 1.0f + float(x & 0xFFFFFF) / float(1 << 24);
  int exponent = int((x >> 24) % 31) - 10;
  float value = std::ldexp(mantissa, exponent);
  return (x >> 60) & 1 ? -value : value;
}

std::vector<float> contributions(int r, size_t count) {
  std::vector<float> v(count);
  for (size_t i = 0; i < count; ++i)
    v[i] = contribution(r, i);
  return v;
}

bool sameBits(const std::vector<float> &a, const std::vector<float> &b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * 4) == 0);
}

TEST(MpiComm, LaunchedRanks) {
  Communicator &comm = *gComm;
  EXPECT_STREQ(comm.backendName(), "mpi");
  const char *worldSize = std::getenv("OMPI_COMM_WORLD_SIZE");
  ASSERT_NE(worldSize, nullptr);
  EXPECT_EQ(comm.size(), std::atoi(worldSize));
  std::vector<int32_t> mine = {comm.rank()}, all(comm.size());
  ASSERT_OK(comm.allGather(mine, all));
  for (int r = 0; r < comm.size(); ++r)
    EXPECT_EQ(all[r], r);
}

TEST(MpiComm, AllReduceSumIsTheRankOrderSumOnEveryRankEveryRun) {
  Communicator &comm = *gComm;
  for (size_t count :
       {size_t(0), size_t(1), size_t(7), size_t(4099), size_t(100003)}) {
    SCOPED_TRACE(count);
    std::vector<float> send = contributions(comm.rank(), count);
    // The serial sum in rank order, from every rank's known contribution.
    std::vector<float> serial = contributions(0, count);
    for (int r = 1; r < comm.size(); ++r) {
      std::vector<float> part = contributions(r, count);
      for (size_t i = 0; i < count; ++i)
        serial[i] += part[i];
    }
    std::vector<float> first(count);
    ASSERT_OK(comm.allReduceSum(send, first));
    EXPECT_TRUE(sameBits(first, serial));
    for (int run = 0; run < 10; ++run) {
      std::vector<float> again(count);
      ASSERT_OK(comm.allReduceSum(send, again));
      EXPECT_TRUE(sameBits(again, first)) << "run " << run;
    }
    // Every rank holds the same bits.
    std::vector<float> everyone(count * comm.size());
    ASSERT_OK(comm.allGather(first, everyone));
    for (int r = 0; r < comm.size(); ++r)
      EXPECT_TRUE(
          sameBits(std::vector<float>(everyone.begin() + r * count,
                                      everyone.begin() + (r + 1) * count),
                   first))
          << "rank " << r;
  }
}

TEST(MpiComm, TheOrderMattersForTheseValues) {
  // Otherwise the bit-identity above would prove nothing: with 3 or more
  // ranks some element's reverse-order sum differs from the rank-order one
  // (with 2, a + b == b + a exactly).
  Communicator &comm = *gComm;
  if (comm.size() < 3)
    GTEST_SKIP() << "addition of two terms is commutative";
  size_t differing = 0;
  for (size_t i = 0; i < 4099; ++i) {
    float forward = contribution(0, i),
          backward = contribution(comm.size() - 1, i);
    for (int r = 1; r < comm.size(); ++r) {
      forward += contribution(r, i);
      backward += contribution(comm.size() - 1 - r, i);
    }
    differing += forward != backward;
  }
  EXPECT_GT(differing, 0u);
}

TEST(MpiComm, AllReduceSumInPlaceAndIntegers) {
  Communicator &comm = *gComm;
  std::vector<float> v = {float(comm.rank()), 1.0f};
  ASSERT_OK(comm.allReduceSum(v, v));
  EXPECT_EQ(v[0], float(comm.size() * (comm.size() - 1) / 2));
  EXPECT_EQ(v[1], float(comm.size()));
  // Integers wrap the same way everywhere.
  std::vector<int32_t> i32 = {INT32_MAX, comm.rank()}, s32(2);
  ASSERT_OK(comm.allReduceSum(i32, s32));
  EXPECT_EQ(s32[0], int32_t(uint32_t(INT32_MAX) * uint32_t(comm.size())));
  EXPECT_EQ(s32[1], comm.size() * (comm.size() - 1) / 2);
  std::vector<int64_t> i64 = {int64_t(1) << 40}, s64(1);
  ASSERT_OK(comm.allReduceSum(i64, s64));
  EXPECT_EQ(s64[0], (int64_t(1) << 40) * comm.size());
}

TEST(MpiComm, AllReduceSumOverGroupsOfConsecutiveRanks) {
  // Groups of 1, 2 (when it divides the ranks) and all: each rank gets the
  // rank-order sum over ranks g*G .. g*G+G-1 holding it, nothing else.
  Communicator &comm = *gComm;
  const size_t count = 4099;
  std::vector<float> send = contributions(comm.rank(), count);
  for (int group : {1, 2, comm.size()}) {
    if (comm.size() % group != 0)
      continue;
    SCOPED_TRACE(group);
    int first = comm.rank() / group * group;
    std::vector<float> serial = contributions(first, count);
    for (int r = first + 1; r < first + group; ++r) {
      std::vector<float> part = contributions(r, count);
      for (size_t i = 0; i < count; ++i)
        serial[i] += part[i];
    }
    std::vector<float> got(count);
    ASSERT_OK(comm.allReduceSum(send, got, group));
    EXPECT_TRUE(sameBits(got, serial));
  }
  std::vector<float> got(count);
  ASSERT_OK(comm.allReduceSum(send, got, 0)); // 0: every rank
  std::vector<float> all(count);
  ASSERT_OK(comm.allReduceSum(send, all));
  EXPECT_TRUE(sameBits(got, all));
  // A group that does not divide the ranks is refused on every rank
  // before any message.
  Status s = comm.allReduceSum(send, got, comm.size() + 1);
  EXPECT_EQ(s.code(), StatusCode::InvalidArgument);
  EXPECT_NE(s.message().find("does not divide the " +
                             std::to_string(comm.size()) + " ranks evenly"),
            std::string::npos)
      << s.message();
  EXPECT_OK(comm.barrier());
}

TEST(MpiComm, AllGatherEqualAndZeroCounts) {
  Communicator &comm = *gComm;
  std::vector<int64_t> send = {comm.rank() * 10, comm.rank() * 10 + 1,
                               comm.rank() * 10 + 2};
  std::vector<int64_t> recv(3 * comm.size());
  ASSERT_OK(comm.allGather(send, recv));
  for (int r = 0; r < comm.size(); ++r)
    for (int k = 0; k < 3; ++k)
      EXPECT_EQ(recv[r * 3 + k], r * 10 + k);
  std::vector<float> none;
  EXPECT_OK(comm.allGather(none, none));
}

size_t gatherCount(int r) { return r % 2 ? 0 : size_t(r) + 2; }

TEST(MpiComm, AllGatherVUnevenAndZeroCounts) {
  Communicator &comm = *gComm;
  Counts counts(comm.size());
  size_t total = 0;
  for (int r = 0; r < comm.size(); ++r)
    total += counts[r] = gatherCount(r);
  std::vector<float> send(gatherCount(comm.rank()));
  for (size_t k = 0; k < send.size(); ++k)
    send[k] = float(comm.rank() * 100 + int(k));
  std::vector<float> recv(total, -1.0f);
  ASSERT_OK(comm.allGatherV(send, recv, counts));
  size_t at = 0;
  for (int r = 0; r < comm.size(); ++r)
    for (size_t k = 0; k < counts[r]; ++k)
      EXPECT_EQ(recv[at++], float(r * 100 + int(k))) << r << " " << k;
  // Every rank empty.
  std::vector<float> none;
  EXPECT_OK(comm.allGatherV(none, none, Counts(comm.size(), 0)));
}

/// Elements `src` sends `dst`: zero for some pairs, self included.
size_t pairCount(int src, int dst) { return size_t(src + 2 * dst) % 3; }

TEST(MpiComm, AllToAllVUnevenZeroCountsAndDisplacements) {
  Communicator &comm = *gComm;
  int n = comm.size(), me = comm.rank();
  // Send pieces in reverse peer order with a one-element gap before each;
  // receive pieces in peer order with a two-element gap before each.
  Counts sendCounts(n), sendDispls(n), recvCounts(n), recvDispls(n);
  size_t at = 0;
  for (int p = n - 1; p >= 0; --p) {
    sendCounts[p] = pairCount(me, p);
    sendDispls[p] = at + 1;
    at += 1 + sendCounts[p];
  }
  std::vector<int32_t> send(at, -7);
  for (int p = 0; p < n; ++p)
    for (size_t k = 0; k < sendCounts[p]; ++k)
      send[sendDispls[p] + k] = me * 1000 + p * 100 + int(k);
  at = 0;
  for (int p = 0; p < n; ++p) {
    recvCounts[p] = pairCount(p, me);
    recvDispls[p] = at + 2;
    at += 2 + recvCounts[p];
  }
  std::vector<int32_t> recv(at, -1);
  ASSERT_OK(comm.allToAllV(send, sendCounts, sendDispls, recv, recvCounts,
                           recvDispls));
  std::vector<int32_t> expected(at, -1);
  for (int p = 0; p < n; ++p)
    for (size_t k = 0; k < recvCounts[p]; ++k)
      expected[recvDispls[p] + k] = p * 1000 + me * 100 + int(k);
  EXPECT_EQ(recv, expected); // the gaps untouched
}

TEST(MpiComm, AllToAllVEverythingOntoOneRank) {
  // Every token routed to rank 0's experts: the other ranks send and receive
  // nothing from each other but still join.
  Communicator &comm = *gComm;
  int n = comm.size(), me = comm.rank();
  Counts sendCounts(n, 0), zeros(n, 0), recvCounts(n, 0), recvDispls(n, 0);
  sendCounts[0] = 5;
  std::vector<float> send(5, float(me));
  if (me == 0)
    for (int p = 0; p < n; ++p) {
      recvCounts[p] = 5;
      recvDispls[p] = size_t(p) * 5;
    }
  std::vector<float> recv(me == 0 ? size_t(n) * 5 : 0);
  ASSERT_OK(
      comm.allToAllV(send, sendCounts, zeros, recv, recvCounts, recvDispls));
  for (size_t i = 0; i < recv.size(); ++i)
    EXPECT_EQ(recv[i], float(i / 5));
}

TEST(MpiComm, BroadcastFromNonZeroRoots) {
  Communicator &comm = *gComm;
  for (int root : {comm.size() - 1, 1}) {
    std::vector<float> f(1000, float(comm.rank()) - 0.5f);
    std::vector<int64_t> l = {comm.rank() == root ? 42 : -1, 7};
    ASSERT_OK(comm.broadcast(f, root));
    ASSERT_OK(comm.broadcast(l, root));
    for (float x : f)
      ASSERT_EQ(x, float(root) - 0.5f);
    EXPECT_EQ(l[0], 42);
  }
}

TEST(MpiComm, Barrier) {
  for (int i = 0; i < 5; ++i)
    ASSERT_OK(gComm->barrier());
}

TEST(MpiComm, BadArgumentsFailBeforeAnyMessage) {
  // Checked on every rank before MPI is called, so nothing is left pending
  // and the next collective still matches.
  Communicator &comm = *gComm;
  std::vector<float> one(1), wrong(comm.size() + 1);
  Status s = comm.allGather(one, wrong);
  EXPECT_EQ(s.code(), StatusCode::InvalidArgument);
  EXPECT_NE(
      s.message().find("mpi allGather on rank " + std::to_string(comm.rank())),
      std::string::npos)
      << s.message();
  EXPECT_FALSE(comm.broadcast(one, comm.size()).isOk());
  EXPECT_OK(comm.barrier());
}

} // namespace

int main(int argc, char **argv) {
  return kiln::comm::test::runOnEveryRank(argc, argv, "MpiCommTest", gComm);
}
