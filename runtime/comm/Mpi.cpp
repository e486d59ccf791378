//===- Mpi.cpp - The MPI communicator -------------------------------------===//

#include "runtime/comm/Mpi.h"

#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <thread>

using namespace kiln;
using namespace kiln::comm;

namespace {

using Clock = std::chrono::steady_clock;

// Set when a collective timed out: its peers may still be inside it, so
// MPI_Finalize (itself a synchronisation) could wait forever.
std::atomic<bool> gTimedOut{false};
// The longest timeout of this process's communicators (0: none made): how
// long the exit waits for the other ranks.
std::atomic<double> gExitTimeout{0};

struct Waited {
  int rc = MPI_SUCCESS; // of the failing MPI_Test
  bool done = false;
  double seconds = 0;
};

/// Polls `request` until it completes, MPI_Test fails or `timeoutSeconds`
/// pass.
Waited pollUntil(MPI_Request &request, double timeoutSeconds) {
  Clock::time_point start = Clock::now();
  Waited w;
  for (unsigned polls = 0;; ++polls) {
    int done = 0;
    w.rc = MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    if (w.rc != MPI_SUCCESS || done) {
      w.done = done;
      return w;
    }
    if (polls < 64)
      continue; // short waits: keep polling, MPI_Test drives progress
    w.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    if (w.seconds >= timeoutSeconds)
      return w;
    // Long waits (a peer still computing, more ranks than cores): give the
    // core away between polls, for longer once the wait is long (an idle
    // serving rank waits for rank 0's next step: 1 ms polls cost it about 1%
    // of a core where 100 us polls cost 11%).
    if (w.seconds < 0.01)
      std::this_thread::yield();
    else if (w.seconds < 0.1)
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    else
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

/// MPI_Finalize waits for every rank, with no deadline: a rank that died or
/// hangs would hold this one at exit forever. So the exit first waits for
/// the others in a barrier with the timeout, and ends the whole job when
/// they do not come, or when a collective already timed out.
void finalizeAtExit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized)
    return;
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  double timeout = gExitTimeout.load();
  if (timeout <= 0)
    timeout = kDefaultTimeoutSeconds;
  char why[160] = "";
  MPI_Request request;
  if (gTimedOut.load())
    std::snprintf(why, sizeof(why), "exiting after a collective timed out");
  else if (MPI_Ibarrier(MPI_COMM_WORLD, &request) != MPI_SUCCESS ||
           !pollUntil(request, timeout).done)
    std::snprintf(why, sizeof(why),
                  "the other ranks did not reach the end of the job within "
                  "%.1f s (a rank died or hangs)",
                  timeout);
  if (*why) {
    std::fprintf(stderr, "kiln: rank %d of %d: %s: ending every rank\n", rank,
                 size, why);
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Finalize();
}

std::string mpiErrorText(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS)
    return "MPI error " + std::to_string(code);
  return std::string(text, size_t(length));
}

Status initMpi() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized)
    return makeError(StatusCode::FailedPrecondition,
                     "MPI was already finalized in this process");
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = 0;
    int rc =
        MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
    if (rc != MPI_SUCCESS)
      return makeError(StatusCode::Unavailable,
                       "MPI_Init_thread failed: ", mpiErrorText(rc));
    std::atexit(finalizeAtExit);
    if (provided < MPI_THREAD_SERIALIZED)
      return makeError(StatusCode::Unavailable, "MPI provides thread level ",
                       provided, ", expected MPI_THREAD_SERIALIZED (",
                       MPI_THREAD_SERIALIZED, ")");
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  return Status::ok();
}

MPI_Datatype mpiType(DataType type) {
  switch (type) {
  case DataType::F32:
    return MPI_FLOAT;
  case DataType::I32:
    return MPI_INT32_T;
  case DataType::I64:
    return MPI_INT64_T;
  }
  return MPI_DATATYPE_NULL;
}

class MpiCommunicator final : public Communicator {
public:
  static Result<std::unique_ptr<Communicator>> create(double timeoutSeconds);
  ~MpiCommunicator() override;

  const char *backendName() const override { return "mpi"; }

  Status barrier() override {
    KILN_RETURN_IF_ERROR(usable("barrier"));
    MPI_Request request;
    KILN_RETURN_IF_ERROR(
        check("barrier", "MPI_Ibarrier", MPI_Ibarrier(comm_, &request)));
    return wait(request, "barrier");
  }

  [[noreturn]] void abortAll(const std::string &message) override {
    std::fprintf(stderr, "kiln: rank %d of %d: %s\n", rank(), size(),
                 message.c_str());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
    std::_Exit(1); // MPI_Abort does not return; if it ever did, still stop.
  }

protected:
  Status doAllGather(const void *send, void *recv, size_t count,
                     DataType type) override {
    KILN_RETURN_IF_ERROR(usable("allGather"));
    KILN_ASSIGN_OR_RETURN(int n, toInt("allGather", count));
    MPI_Request request;
    KILN_RETURN_IF_ERROR(check("allGather", "MPI_Iallgather",
                               MPI_Iallgather(send, n, mpiType(type), recv, n,
                                              mpiType(type), comm_, &request)));
    return wait(request, "allGather");
  }

  Status doAllGatherV(Bytes send, void *recv, const Counts &recvCounts,
                      const Counts &recvDispls, DataType type) override {
    KILN_RETURN_IF_ERROR(usable("allGatherV"));
    KILN_ASSIGN_OR_RETURN(int n, toInt("allGatherV", send.count));
    KILN_ASSIGN_OR_RETURN(std::vector<int> counts,
                          toInts("allGatherV", recvCounts));
    KILN_ASSIGN_OR_RETURN(std::vector<int> displs,
                          toInts("allGatherV", recvDispls));
    MPI_Request request;
    KILN_RETURN_IF_ERROR(
        check("allGatherV", "MPI_Iallgatherv",
              MPI_Iallgatherv(send.data, n, mpiType(type), recv, counts.data(),
                              displs.data(), mpiType(type), comm_, &request)));
    return wait(request, "allGatherV");
  }

  Status doAllToAllV(const void *send, const Counts &sendCounts,
                     const Counts &sendDispls, void *recv,
                     const Counts &recvCounts, const Counts &recvDispls,
                     DataType type) override {
    KILN_RETURN_IF_ERROR(usable("allToAllV"));
    std::vector<int> lists[4];
    const Counts *from[4] = {&sendCounts, &sendDispls, &recvCounts,
                             &recvDispls};
    for (int i = 0; i < 4; ++i) {
      KILN_ASSIGN_OR_RETURN(lists[i], toInts("allToAllV", *from[i]));
    }
    MPI_Request request;
    KILN_RETURN_IF_ERROR(
        check("allToAllV", "MPI_Ialltoallv",
              MPI_Ialltoallv(send, lists[0].data(), lists[1].data(),
                             mpiType(type), recv, lists[2].data(),
                             lists[3].data(), mpiType(type), comm_, &request)));
    return wait(request, "allToAllV");
  }

  Status doBroadcast(void *buffer, size_t count, int root,
                     DataType type) override {
    KILN_RETURN_IF_ERROR(usable("broadcast"));
    KILN_ASSIGN_OR_RETURN(int n, toInt("broadcast", count));
    MPI_Request request;
    KILN_RETURN_IF_ERROR(
        check("broadcast", "MPI_Ibcast",
              MPI_Ibcast(buffer, n, mpiType(type), root, comm_, &request)));
    return wait(request, "broadcast");
  }

private:
  MpiCommunicator(MPI_Comm comm, int rank, int size, double timeoutSeconds)
      : Communicator(rank, size), comm_(comm), timeoutSeconds_(timeoutSeconds) {
  }

  /// Polls `request` until it completes, fails or the deadline passes.
  Status wait(MPI_Request &request, const char *collective);
  Status check(const char *collective, const char *call, int rc) const {
    if (rc == MPI_SUCCESS)
      return Status::ok();
    return makeError(StatusCode::Internal, where(collective), call,
                     " failed: ", mpiErrorText(rc));
  }
  /// An error once an earlier collective timed out.
  Status usable(const char *collective) const {
    if (timedOut_.empty())
      return Status::ok();
    return makeError(StatusCode::FailedPrecondition, where(collective),
                     "an earlier ", timedOut_,
                     " timed out, so this communicator is unusable: end the "
                     "job (abortAll)");
  }
  Result<int> toInt(const char *collective, size_t count) const {
    if (count > size_t(INT_MAX))
      return makeError(StatusCode::OutOfRange, where(collective), count,
                       " elements exceed MPI's int counts (", INT_MAX, ")");
    return int(count);
  }
  Result<std::vector<int>> toInts(const char *collective,
                                  const Counts &counts) const {
    std::vector<int> ints(counts.size());
    for (size_t i = 0; i < counts.size(); ++i) {
      KILN_ASSIGN_OR_RETURN(ints[i], toInt(collective, counts[i]));
    }
    return ints;
  }

  MPI_Comm comm_;
  double timeoutSeconds_;
  std::string timedOut_; // the collective that timed out, if any
};

Status MpiCommunicator::wait(MPI_Request &request, const char *collective) {
  Waited w = pollUntil(request, timeoutSeconds_);
  if (w.rc != MPI_SUCCESS)
    return check(collective, "MPI_Test", w.rc);
  if (w.done)
    return Status::ok();
  timedOut_ = collective;
  gTimedOut = true;
  char seconds[32];
  std::snprintf(seconds, sizeof(seconds), "%.1f", w.seconds);
  return makeError(StatusCode::Unavailable, where(collective),
                   "timed out after ", seconds,
                   " s waiting for the other ranks (a rank died, hangs, or "
                   "called a different collective; timeout from "
                   "KILN_COMM_TIMEOUT_S)");
}

Result<std::unique_ptr<Communicator>>
MpiCommunicator::create(double timeoutSeconds) {
  KILN_RETURN_IF_ERROR(initMpi());
  gExitTimeout = std::max(gExitTimeout.load(), timeoutSeconds);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  // A communicator of our own, so that Kiln's collectives never match a
  // library's or the application's on MPI_COMM_WORLD. MPI_Comm_idup is
  // itself collective: wait for it with the same deadline.
  MPI_Comm comm = MPI_COMM_NULL;
  MPI_Request request;
  std::unique_ptr<MpiCommunicator> self(
      new MpiCommunicator(MPI_COMM_NULL, rank, size, timeoutSeconds));
  KILN_RETURN_IF_ERROR(
      self->check("create", "MPI_Comm_idup",
                  MPI_Comm_idup(MPI_COMM_WORLD, &comm, &request)));
  KILN_RETURN_IF_ERROR(self->wait(request, "create"));
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  self->comm_ = comm;
  return std::unique_ptr<Communicator>(std::move(self));
}

MpiCommunicator::~MpiCommunicator() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (comm_ != MPI_COMM_NULL && !finalized && timedOut_.empty())
    MPI_Comm_free(&comm_);
}

} // namespace

bool kiln::comm::mpiAvailable() { return true; }

Result<std::unique_ptr<Communicator>>
kiln::comm::makeMpiCommunicator(const CommOptions &options) {
  KILN_ASSIGN_OR_RETURN(double timeout, resolveTimeout(options));
  return MpiCommunicator::create(timeout);
}
