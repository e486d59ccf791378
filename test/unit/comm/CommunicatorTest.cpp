//===- CommunicatorTest.cpp - One process: checks, sums, the factory ------===//
//
// The single-process backend, the argument checks every backend shares, the
// fixed-order sum, the timeout setting, the factory, and the RCCL backend
// against this machine's missing librccl and against a one-rank fake.
// The multi-rank behaviour is MpiCommTest.cpp's, under mpirun.
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/CommFactory.h"
#include "runtime/comm/Rccl.h"
#include "runtime/comm/SingleProcess.h"

#include <gtest/gtest.h>

#include <climits>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <numeric>

using namespace kiln;
using namespace kiln::comm;

namespace {

/// Sets an environment variable for one scope.
class ScopedEnv {
public:
  ScopedEnv(const char *name, const char *value) : name_(name) {
    if (const char *old = std::getenv(name))
      old_ = old, hadOld_ = true;
    if (value)
      setenv(name, value, 1);
    else
      unsetenv(name);
  }
  ~ScopedEnv() {
    if (hadOld_)
      setenv(name_, old_.c_str(), 1);
    else
      unsetenv(name_);
  }

private:
  const char *name_;
  std::string old_;
  bool hadOld_ = false;
};

std::unique_ptr<Communicator> single() {
  return makeSingleProcessCommunicator();
}

std::string message(const Status &status) { return status.message(); }

TEST(SingleProcess, RankAndSize) {
  auto comm = single();
  EXPECT_EQ(comm->rank(), 0);
  EXPECT_EQ(comm->size(), 1);
  EXPECT_STREQ(comm->backendName(), "single-process");
  EXPECT_TRUE(comm->barrier().isOk());
}

TEST(SingleProcess, AllReduceSumCopiesEveryType) {
  auto comm = single();
  std::vector<float> f = {1.5f, -0.0f, 3.0f}, fOut(3);
  ASSERT_TRUE(comm->allReduceSum(f, fOut).isOk());
  EXPECT_EQ(0, std::memcmp(f.data(), fOut.data(), sizeof(float) * 3));
  std::vector<int32_t> i = {INT32_MAX, -7}, iOut(2);
  ASSERT_TRUE(comm->allReduceSum(i, iOut).isOk());
  EXPECT_EQ(iOut, i);
  std::vector<int64_t> l = {INT64_MIN, 9}, lOut(2);
  ASSERT_TRUE(comm->allReduceSum(l, lOut).isOk());
  EXPECT_EQ(lOut, l);
  // In place, and empty.
  ASSERT_TRUE(comm->allReduceSum(f, f).isOk());
  EXPECT_EQ(f[2], 3.0f);
  std::vector<float> none;
  EXPECT_TRUE(comm->allReduceSum(none, none).isOk());
}

TEST(SingleProcess, GathersAndAllToAllCopy) {
  auto comm = single();
  std::vector<float> send = {1, 2, 3}, recv(3);
  ASSERT_TRUE(comm->allGather(send, recv).isOk());
  EXPECT_EQ(recv, send);
  std::fill(recv.begin(), recv.end(), 0.0f);
  ASSERT_TRUE(comm->allGatherV(send, recv, {3}).isOk());
  EXPECT_EQ(recv, send);
  std::vector<float> empty;
  EXPECT_TRUE(comm->allGatherV(empty, empty, {0}).isOk());

  // A piece from the middle of send to the end of recv.
  std::vector<int32_t> from = {0, 5, 6, 0}, to = {9, 9, 9, 9};
  ASSERT_TRUE(comm->allToAllV(from, {2}, {1}, to, {2}, {2}).isOk());
  EXPECT_EQ(to, (std::vector<int32_t>{9, 9, 5, 6}));
  // Zero counts: nothing moves.
  ASSERT_TRUE(comm->allToAllV(from, {0}, {4}, to, {0}, {4}).isOk());
  EXPECT_EQ(to, (std::vector<int32_t>{9, 9, 5, 6}));

  std::vector<int64_t> b = {4, 2};
  EXPECT_TRUE(comm->broadcast(b, 0).isOk());
  EXPECT_EQ(b, (std::vector<int64_t>{4, 2}));
  // Raw pointers through Span.
  float x = 2.5f, y = 0;
  ASSERT_TRUE(comm->allReduceSum(Span<const float>(&x, 1), Span(&y, 1)).isOk());
  EXPECT_EQ(y, 2.5f);
}

TEST(SingleProcess, BadArgumentsAreErrors) {
  auto comm = single();
  std::vector<float> three(3), two(2), four(4);
  Status s = comm->allReduceSum(three, two);
  EXPECT_EQ(s.code(), StatusCode::InvalidArgument);
  EXPECT_EQ(message(s), "single-process allReduceSum on rank 0 of 1: the send "
                        "buffer has 3 elements and the receive buffer 2, "
                        "expected equal sizes");
  s = comm->allGather(three, four);
  EXPECT_EQ(message(s), "single-process allGather on rank 0 of 1: the receive "
                        "buffer has 4 elements, expected 1 x 3 = 3");
  EXPECT_EQ(message(comm->allGather(three, three)),
            "single-process allGather on rank 0 of 1: the send and receive "
            "buffers overlap");
  EXPECT_EQ(message(comm->allGatherV(three, three, {3, 0})),
            "single-process allGatherV on rank 0 of 1: 2 receive counts, "
            "expected one per rank (1)");
  EXPECT_EQ(message(comm->allGatherV(three, four, {2})),
            "single-process allGatherV on rank 0 of 1: this rank sends 3 "
            "elements but its receive count is 2");
  EXPECT_EQ(message(comm->allGatherV(three, four, {3})),
            "single-process allGatherV on rank 0 of 1: the receive buffer has "
            "4 elements, expected the sum of the counts, 3");

  s = comm->allToAllV(three, {2}, {2}, four, {2}, {0});
  EXPECT_EQ(s.code(), StatusCode::OutOfRange);
  EXPECT_EQ(message(s), "single-process allToAllV on rank 0 of 1: the piece "
                        "for rank 0 [2, +2) is outside the send buffer of 3 "
                        "elements");
  EXPECT_EQ(message(comm->allToAllV(three, {1}, {0}, four, {1}, {4})),
            "single-process allToAllV on rank 0 of 1: the piece from rank 0 "
            "[4, +1) is outside the receive buffer of 4 elements");
  EXPECT_EQ(message(comm->allToAllV(three, {1}, {0}, four, {1, 1}, {0})),
            "single-process allToAllV on rank 0 of 1: recvCounts has 2 "
            "entries, expected one per rank (1)");
  EXPECT_EQ(message(comm->allToAllV(three, {1}, {0}, four, {2}, {0})),
            "single-process allToAllV on rank 0 of 1: this rank sends itself "
            "1 elements but expects to receive 2");
  // A displacement near SIZE_MAX must not wrap around the bounds check.
  EXPECT_EQ(comm->allToAllV(three, {2}, {SIZE_MAX}, four, {2}, {0}).code(),
            StatusCode::OutOfRange);

  s = comm->broadcast(three, 1);
  EXPECT_EQ(message(s), "single-process broadcast on rank 0 of 1: root 1 is "
                        "not a rank, expected 0 to 0");
}

TEST(FixedOrderSum, AddsLeftToRightInRankOrder) {
  // 1e8 + 1 - 1e8 is 0 left to right in float, 1 in any order that adds
  // the two large terms first: the sum must be the rank-order one.
  const float parts[3] = {1e8f, 1.0f, -1e8f};
  float out = -1;
  sumInRankOrder(parts, &out, 1, 3, DataType::F32);
  float serial = parts[0];
  serial += parts[1];
  serial += parts[2];
  EXPECT_EQ(out, serial);
  EXPECT_EQ(out, 0.0f);
  EXPECT_NE(out, (parts[0] + parts[2]) + parts[1]);

  // Several elements per rank: slice r starts at r * count.
  std::vector<float> gathered(4 * 5);
  std::iota(gathered.begin(), gathered.end(), 0.25f);
  std::vector<float> sum(5);
  sumInRankOrder(gathered.data(), sum.data(), 5, 4, DataType::F32);
  for (size_t i = 0; i < 5; ++i) {
    float acc = gathered[i];
    for (size_t r = 1; r < 4; ++r)
      acc += gathered[r * 5 + i];
    EXPECT_EQ(0, std::memcmp(&acc, &sum[i], sizeof(float))) << i;
  }
}

TEST(FixedOrderSum, IntegersWrap) {
  const int32_t i32[2] = {INT32_MAX, 1};
  int32_t out32 = 0;
  sumInRankOrder(i32, &out32, 1, 2, DataType::I32);
  EXPECT_EQ(out32, INT32_MIN);
  const int64_t i64[3] = {INT64_MIN, -1, 5};
  int64_t out64 = 0;
  sumInRankOrder(i64, &out64, 1, 3, DataType::I64);
  EXPECT_EQ(out64, INT64_MIN + 4); // MIN - 1 wraps to MAX, MAX + 5 to MIN + 4
}

TEST(Timeout, OptionThenEnvironmentThenDefault) {
  ScopedEnv unset("KILN_COMM_TIMEOUT_S", nullptr);
  EXPECT_EQ(*resolveTimeout({}), kDefaultTimeoutSeconds);
  {
    ScopedEnv env("KILN_COMM_TIMEOUT_S", "2.5");
    EXPECT_EQ(*resolveTimeout({}), 2.5);
    CommOptions options;
    options.timeoutSeconds = 7;
    EXPECT_EQ(*resolveTimeout(options), 7);
  }
  for (const char *bad : {"abc", "0", "-3", "5s"}) {
    ScopedEnv env("KILN_COMM_TIMEOUT_S", bad);
    Result<double> t = resolveTimeout({});
    ASSERT_FALSE(t.isOk()) << bad;
    EXPECT_EQ(t.status().message(),
              std::string("KILN_COMM_TIMEOUT_S='") + bad +
                  "' is not a positive number of seconds");
  }
}

TEST(Factory, KindsAndAuto) {
  EXPECT_EQ(*parseCommKind("mpi"), CommKind::Mpi);
  EXPECT_EQ(*parseCommKind("single-process"), CommKind::SingleProcess);
  EXPECT_STREQ(commKindName(CommKind::Rccl), "rccl");
  Result<CommKind> bad = parseCommKind("nccl");
  ASSERT_FALSE(bad.isOk());
  EXPECT_EQ(bad.status().message(), "communicator 'nccl' is unknown, expected "
                                    "auto, single-process, mpi or rccl");
  // Not started by mpirun: auto is a single process.
  ScopedEnv a("OMPI_COMM_WORLD_SIZE", nullptr), b("PMIX_RANK", nullptr),
      c("PMI_RANK", nullptr);
  EXPECT_EQ(mpiLauncherVariable(), nullptr);
  auto comm = makeCommunicator(CommKind::Auto);
  ASSERT_TRUE(comm.isOk()) << comm.status().toString();
  EXPECT_STREQ((*comm)->backendName(), "single-process");
  ScopedEnv launched("PMIX_RANK", "0");
  EXPECT_STREQ(mpiLauncherVariable(), "PMIX_RANK");
}

TEST(SingleProcessDeathTest, AbortAllExitsNonZeroWithTheMessage) {
  auto comm = single();
  EXPECT_EXIT(comm->abortAll("the allGather timed out"),
              testing::ExitedWithCode(1),
              "kiln: rank 0 of 1: the allGather timed out");
}

// RCCL ----------------------------------------------------------------------

CommOptions fakeRccl(const char *path = KILN_FAKE_RCCL) {
  CommOptions options;
  options.rcclLibraries = {path};
  return options;
}

std::string fakeCalls() {
  void *handle = dlopen(KILN_FAKE_RCCL, RTLD_NOW | RTLD_NOLOAD);
  if (!handle)
    return "(fake not loaded)";
  auto calls =
      reinterpret_cast<const char *(*)()>(dlsym(handle, "fakeRcclCalls"));
  std::string text = calls ? calls() : "(no fakeRcclCalls)";
  dlclose(handle);
  return text;
}

TEST(Rccl, ReportsMissingLibrary) {
  void *real = dlopen("librccl.so", RTLD_NOW | RTLD_LOCAL);
  if (real) {
    dlclose(real);
    GTEST_SKIP() << "this machine has RCCL";
  }
  ScopedEnv unset("KILN_RCCL_LIBRARY", nullptr);
  auto comm = makeCommunicator(CommKind::Rccl);
  ASSERT_FALSE(comm.isOk());
  EXPECT_EQ(comm.status().code(), StatusCode::Unavailable);
  const std::string &text = comm.status().message();
  EXPECT_EQ(text.rfind("RCCL (librccl.so) not found: the rccl backend needs "
                       "ROCm's RCCL (set KILN_RCCL_LIBRARY to its path)",
                       0),
            0u)
      << text;
  EXPECT_NE(text.find("librccl.so.1"), std::string::npos) << text;
  EXPECT_NE(text.find("/opt/rocm/lib/librccl.so"), std::string::npos) << text;
}

TEST(Rccl, LibraryWithoutTheSymbolsNamesTheMissingOne) {
  ScopedEnv env("KILN_RCCL_LIBRARY", KILN_FAKE_RCCL_INCOMPLETE);
  auto comm = makeCommunicator(CommKind::Rccl);
  ASSERT_FALSE(comm.isOk());
  EXPECT_EQ(comm.status().code(), StatusCode::Unavailable);
  EXPECT_EQ(comm.status().message(),
            std::string("RCCL library ") + KILN_FAKE_RCCL_INCOMPLETE +
                " lacks the symbol ncclCommInitRank: it is not a usable "
                "librccl (NCCL 2.x API)");
}

TEST(Rccl, FakeLibraryRunsEveryCollective) {
  auto made = makeRcclCommunicator(single(), fakeRccl());
  ASSERT_TRUE(made.isOk()) << made.status().toString();
  RcclCommunicator &comm = **made;
  EXPECT_STREQ(comm.backendName(), "rccl");
  EXPECT_EQ(comm.libraryPath(), KILN_FAKE_RCCL);
  // The id went through the bootstrap's broadcast intact (the fake checks).
  std::string joined = fakeCalls();
  EXPECT_EQ(joined.size() - joined.rfind("ncclGetUniqueId ncclCommInitRank"),
            std::string("ncclGetUniqueId ncclCommInitRank").size())
      << joined;

  std::vector<float> send = {1, 2, 3}, recv(3);
  ASSERT_TRUE(comm.allGather(send, recv).isOk());
  EXPECT_EQ(recv, send);
  std::vector<float> empty;
  ASSERT_TRUE(comm.allGatherV(empty, empty, {0}).isOk()); // nothing called
  std::vector<int32_t> from = {0, 5, 6}, to(4, 9);
  ASSERT_TRUE(comm.allToAllV(from, {2}, {1}, to, {2}, {1}).isOk());
  EXPECT_EQ(to, (std::vector<int32_t>{9, 5, 6, 9}));
  ASSERT_TRUE(comm.allToAllV(from, {0}, {0}, to, {0}, {0}).isOk());
  std::vector<int64_t> ints = {3, 4}, sums(2);
  ASSERT_TRUE(comm.allReduceSum(ints, sums).isOk());
  EXPECT_EQ(sums, ints);
  ASSERT_TRUE(comm.broadcast(ints, 0).isOk());
  EXPECT_TRUE(comm.barrier().isOk());
  std::string calls = fakeCalls();
  EXPECT_NE(calls.find("ncclAllGather ncclGroupStart ncclGroupEnd "
                       "ncclGroupStart ncclSend ncclRecv ncclGroupEnd "
                       "ncclGroupStart ncclGroupEnd ncclAllReduce "
                       "ncclBroadcast"),
            std::string::npos)
      << calls;
}

TEST(Rccl, FloatAllReduceNeedsTheDeviceSum) {
  auto made = makeRcclCommunicator(single(), fakeRccl());
  ASSERT_TRUE(made.isOk()) << made.status().toString();
  RcclCommunicator &comm = **made;
  std::vector<float> send = {1.5f, 2.5f}, recv(2);
  Status s = comm.allReduceSum(send, recv);
  EXPECT_EQ(s.code(), StatusCode::FailedPrecondition);
  EXPECT_EQ(s.message(), "rccl allReduceSum on rank 0 of 1: a float sum in "
                         "rank order needs the GPU path's device sum "
                         "(RcclCommunicator::setRankOrderSum); none is "
                         "installed");

  // A host stand-in for the kernel: gather into the scratch, then the sum.
  std::vector<float> scratch;
  DeviceRankOrderSum hook;
  hook.scratch = [&](size_t bytes) -> Result<void *> {
    scratch.resize(bytes / sizeof(float));
    return static_cast<void *>(scratch.data());
  };
  hook.sum = [](const void *gathered, void *out, size_t count, int ranks,
                void *) {
    sumInRankOrder(gathered, out, count, ranks, DataType::F32);
    return Status::ok();
  };
  comm.setRankOrderSum(hook);
  ASSERT_TRUE(comm.allReduceSum(send, recv).isOk());
  EXPECT_EQ(recv, send);
  EXPECT_EQ(scratch, send);
  // A group of the one rank takes the same path; integers over a group
  // smaller than the world are refused (none here: 1 divides 1, so only
  // the bad group is checked).
  ASSERT_TRUE(comm.allReduceSum(send, recv, 1).isOk());
  EXPECT_EQ(recv, send);
  Status bad = comm.allReduceSum(send, recv, 2);
  EXPECT_EQ(bad.code(), StatusCode::InvalidArgument);
}

TEST(Rccl, AsyncErrorFailsTheNextCall) {
  auto made = makeRcclCommunicator(single(), fakeRccl());
  ASSERT_TRUE(made.isOk()) << made.status().toString();
  ScopedEnv error("KILN_FAKE_RCCL_ASYNC_ERROR", "6");
  std::vector<float> send = {1}, recv(1);
  Status s = (*made)->allGather(send, recv);
  EXPECT_EQ(s.code(), StatusCode::Internal);
  EXPECT_EQ(s.message(), "rccl allGather on rank 0 of 1: an earlier "
                         "operation failed asynchronously with ncclResult_t 6 "
                         "(fake error)");
  EXPECT_EQ((*made)->asyncError().code(), StatusCode::Internal);
}

} // namespace
