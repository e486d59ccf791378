//===- Rccl.h - Collectives between AMD GPUs over RCCL ----------*- C++ -*-===//
//
// RCCL (the NCCL C API on ROCm), opened with dlopen at run time: nothing
// links it and the CPU build needs no ROCm. The ranks agree on an
// ncclUniqueId through a bootstrap communicator (MPI under mpirun), then
// every collective is one NCCL call, or a group of them, enqueued on the
// HIP stream given in CommOptions::stream. Buffers are device pointers the
// backend never dereferences.
//
// What is and is not here:
//  * allGather, allGatherV (a group of ncclBroadcast, one per rank with a
//    non-empty piece), allToAllV (a group of ncclSend/ncclRecv, empty pieces
//    skipped) and broadcast are NCCL calls;
//  * allReduceSum on int32/int64 is ncclAllReduce: integer sums do not
//    depend on the order, so it equals the rank-order sum bit for bit;
//  * allReduceSum on float keeps the fixed-order rule: ncclAllGather into a
//    device scratch buffer, then a kernel that adds the slices in rank
//    order. That kernel is the GPU path's job (a code object of the
//    artifact): until it is installed with setRankOrderSum, a float
//    allReduceSum returns FailedPrecondition. ncclAllReduce is never used for
//    floats because its order depends on the algorithm and the topology;
//  * barrier is a host barrier over the bootstrap communicator: every rank
//    has called it; it does not wait for work queued on the stream.
// Collectives return once enqueued (NCCL's rule); completion is the
// stream's. A peer failure the library notices is returned by the next
// call (ncclCommGetAsyncError); the bootstrap's timeout covers the id
// exchange, not ncclCommInitRank or the device work, which the GPU path
// waits for with its own deadline (asyncError, abortAll).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_COMM_RCCL_H
#define KILN_RUNTIME_COMM_RCCL_H

#include "runtime/comm/Communicator.h"

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace kiln::comm {

/// $KILN_RCCL_LIBRARY when set, then librccl.so, librccl.so.1 and ROCm's
/// default prefix.
std::vector<std::string> defaultRcclLibraries();

/// The GPU path's half of the fixed-order float all-reduce.
struct DeviceRankOrderSum {
  /// A device buffer of at least `bytes`, owned by the caller and valid
  /// until the next call.
  std::function<Result<void *>(size_t bytes)> scratch;
  /// Enqueues on `stream`: out[i] = g[0][i] + g[1][i] + ... + g[ranks-1][i],
  /// added left to right, where g[r] = gathered + r * count floats.
  std::function<Status(const void *gathered, void *out, size_t count, int ranks,
                       void *stream)>
      sum;
};

class RcclCommunicator : public Communicator {
public:
  /// Installs the device sum that allReduceSum on floats needs.
  virtual void setRankOrderSum(DeviceRankOrderSum sum) = 0;
  /// An error RCCL reported asynchronously (e.g. a peer failed), else ok.
  virtual Status asyncError() = 0;
  /// The library that was opened.
  virtual const std::string &libraryPath() const = 0;

protected:
  using Communicator::Communicator;
};

/// Opens RCCL (options.rcclLibraries, else defaultRcclLibraries()), agrees on
/// a unique id over `bootstrap` and joins the NCCL communicator of
/// bootstrap's size and rank. The caller has selected this rank's GPU
/// (hipSetDevice). Unavailable when no library loads or one lacks a symbol;
/// the message names what was tried or what is missing.
Result<std::unique_ptr<RcclCommunicator>>
makeRcclCommunicator(std::unique_ptr<Communicator> bootstrap,
                     const CommOptions &options = {});

} // namespace kiln::comm

#endif // KILN_RUNTIME_COMM_RCCL_H
