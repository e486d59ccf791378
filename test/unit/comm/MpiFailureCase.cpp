//===- MpiFailureCase.cpp - One rank fails before a collective ------------===//
//
//   mpirun -np N comm-failure-case exit|hang|none COLLECTIVE
//
// Every rank joins a barrier, then rank 1 leaves (exit: _Exit(0), no
// MPI_Finalize) or stops answering (hang: sleeps forever), and the others
// call COLLECTIVE (allreduce, allgather, allgatherv, alltoallv, broadcast,
// barrier, or none: straight to the exit). They must not wait forever: the
// collective fails after KILN_COMM_TIMEOUT_S and the rank does what a tool
// does, print the error and abortAll; or the exit's bounded wait for the
// other ranks ends the job; or the launcher does. check_failure.py runs it
// and checks the time, the exit status and the message.
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/CommFactory.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

using namespace kiln;
using namespace kiln::comm;

namespace {

Status runCollective(Communicator &comm, const std::string &name) {
  int n = comm.size();
  std::vector<float> one = {1.0f}, sum(1), many(n);
  if (name == "allreduce")
    return comm.allReduceSum(one, sum);
  if (name == "allgather")
    return comm.allGather(one, many);
  if (name == "allgatherv")
    return comm.allGatherV(one, many, Counts(n, 1));
  if (name == "alltoallv") {
    Counts counts(n, 1), displs(n);
    for (int p = 0; p < n; ++p)
      displs[p] = size_t(p);
    std::vector<float> send(n, 2.0f);
    return comm.allToAllV(send, counts, displs, many, counts, displs);
  }
  if (name == "broadcast") // from the last rank: rank 1 when there are 2
    return comm.broadcast(one, n - 1);
  if (name == "barrier")
    return comm.barrier();
  if (name == "none") // straight to the exit, which waits for every rank
    return Status::ok();
  return makeError(StatusCode::InvalidArgument, "unknown collective ", name);
}

} // namespace

int main(int argc, char **argv) {
  if (argc != 3) {
    std::fprintf(stderr,
                 "usage: comm-failure-case exit|hang|none COLLECTIVE\n");
    return 2;
  }
  std::string scenario = argv[1], collective = argv[2];
  auto made = makeCommunicator(CommKind::Auto);
  if (!made.isOk()) {
    std::fprintf(stderr, "comm-failure-case: %s\n",
                 made.status().toString().c_str());
    return 1;
  }
  Communicator &comm = **made;
  if (Status s = comm.barrier(); !s.isOk())
    comm.abortAll(s.toString());
  if (comm.rank() == 1 && scenario == "exit")
    std::_Exit(0);
  if (comm.rank() == 1 && scenario == "hang")
    for (;;)
      std::this_thread::sleep_for(std::chrono::seconds(1));
  if (Status s = runCollective(comm, collective); !s.isOk())
    comm.abortAll(s.toString());
  std::printf("rank %d: %s done\n", comm.rank(), collective.c_str());
  return 0;
}
