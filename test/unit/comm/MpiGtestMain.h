//===- MpiGtestMain.h - gtest on every MPI rank -----------------*- C++ -*-===//
//
// The main() of a gtest binary that ctest runs under mpirun: every rank runs
// the same tests in the same order over one communicator (`comm`), each
// checking its own results. Rank 0 prints gtest's output; other ranks print
// only their failed assertions, prefixed with the rank; the exit status is
// non-zero on every rank when any rank failed.
//
//   int main(int argc, char **argv) {
//     return kiln::comm::test::runOnEveryRank(argc, argv, "MyTest", gComm);
//   }
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TEST_UNIT_COMM_MPIGTESTMAIN_H
#define KILN_TEST_UNIT_COMM_MPIGTESTMAIN_H

#include "runtime/comm/CommFactory.h"

#include <gtest/gtest.h>

#include <cstdio>

namespace kiln::comm::test {

class RankFailures : public testing::EmptyTestEventListener {
public:
  explicit RankFailures(int rank) : rank_(rank) {}
  void OnTestPartResult(const testing::TestPartResult &result) override {
    if (result.failed())
      std::fprintf(stderr, "[rank %d] %s:%d: %s\n", rank_,
                   result.file_name() ? result.file_name() : "?",
                   result.line_number(), result.summary());
  }

private:
  int rank_;
};

/// Makes the communicator (MPI under mpirun), points `comm` at it for the
/// tests, runs them and agrees on the result across the ranks.
inline int runOnEveryRank(int argc, char **argv, const char *name,
                          Communicator *&comm) {
  testing::InitGoogleTest(&argc, argv);
  auto made = makeCommunicator(CommKind::Auto);
  if (!made.isOk()) {
    std::fprintf(stderr, "%s: %s\n", name, made.status().toString().c_str());
    return 1;
  }
  comm = made->get();
  if (comm->rank() != 0) {
    testing::TestEventListeners &listeners =
        testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new RankFailures(comm->rank()));
  }
  int failed = RUN_ALL_TESTS() != 0;
  std::vector<int32_t> mine = {failed}, ranksFailed(1);
  Status summed = comm->allReduceSum(mine, ranksFailed);
  if (!summed.isOk())
    comm->abortAll(summed.toString());
  if (comm->rank() == 0 && ranksFailed[0])
    std::fprintf(stderr, "%s: %d of %d ranks failed\n", name, ranksFailed[0],
                 comm->size());
  comm = nullptr;
  made->reset();
  return ranksFailed[0] ? 1 : 0;
}

} // namespace kiln::comm::test

#endif // KILN_TEST_UNIT_COMM_MPIGTESTMAIN_H
