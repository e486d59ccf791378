//===- FakeRccl.cpp - A one-rank librccl on host memory -------------------===//
//
// Stands in for librccl in the RCCL backend's tests on machines without
// ROCm: the NCCL entry points for a communicator of one rank, with "device"
// buffers in host memory, so that the backend's calls (groups of send/recv,
// broadcasts, the id exchange) run for real. Built three times: complete,
// with KILN_FAKE_RCCL_INCOMPLETE, lacking every symbol after
// ncclGetUniqueId, and with KILN_FAKE_RCCL_MPI, where the communicator is
// every rank of MPI_COMM_WORLD and the collectives are MPI's on the host
// buffers (the "device" memory of the GPU IR interpreter's libamdhip64), for
// GPU ranks under mpirun without GPUs.
// $KILN_FAKE_RCCL_ASYNC_ERROR makes ncclCommGetAsyncError report that code.
// fakeRcclCalls() lists the calls made, for the tests to read.
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/RcclApi.h"

#ifdef KILN_FAKE_RCCL_MPI
#define OMPI_SKIP_MPICXX 1 // the C API only
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

using namespace kiln::comm::rccl;

#define FAKE_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

std::string gCalls;
std::vector<std::pair<const void *, size_t>> gSends; // (buffer, bytes)
std::vector<std::pair<void *, size_t>> gRecvs;
int gGroupDepth = 0;

void record(const char *call) {
  gCalls += gCalls.empty() ? "" : " ";
  gCalls += call;
}

size_t bytesOf(size_t count, ncclDataType_t type) {
  return count * (type == ncclInt64 ? 8 : 4);
}

void copy(void *dst, const void *src, size_t bytes) {
  if (dst != src && bytes)
    std::memmove(dst, src, bytes);
}

#ifdef KILN_FAKE_RCCL_MPI
MPI_Datatype mpiType(ncclDataType_t type) {
  return type == ncclInt64   ? MPI_INT64_T
         : type == ncclInt32 ? MPI_INT32_T
                             : MPI_FLOAT;
}
int worldRank() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}
ncclResult_t mpiResult(int error) {
  return error == MPI_SUCCESS ? ncclSuccess : ncclSystemError;
}
std::vector<MPI_Request> gRequests; // a group's sends and receives
#endif

} // namespace

FAKE_EXPORT const char *fakeRcclCalls() { return gCalls.c_str(); }

FAKE_EXPORT const char *ncclGetErrorString(ncclResult_t result) {
  return result == ncclInvalidUsage ? "invalid usage (fake)" : "fake error";
}

FAKE_EXPORT ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
  record("ncclGetUniqueId");
  for (size_t i = 0; i < NCCL_UNIQUE_ID_BYTES; ++i)
    id->internal[i] = char(i * 7 + 1);
  return ncclSuccess;
}

#ifndef KILN_FAKE_RCCL_INCOMPLETE

FAKE_EXPORT ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks,
                                          ncclUniqueId id, int rank) {
  record("ncclCommInitRank");
  for (size_t i = 0; i < NCCL_UNIQUE_ID_BYTES; ++i)
    if (id.internal[i] != char(i * 7 + 1))
      return ncclInvalidArgument; // the id did not arrive intact
#ifdef KILN_FAKE_RCCL_MPI
  int initialized = 0, size = 0;
  MPI_Initialized(&initialized);
  if (!initialized)
    return ncclInvalidUsage; // the bootstrap is MPI: it is up
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (nranks != size || rank != worldRank())
    return ncclInvalidUsage;
#else
  if (nranks != 1 || rank != 0)
    return ncclInvalidUsage;
#endif
  *comm = reinterpret_cast<ncclComm_t>(new int(0));
  return ncclSuccess;
}

FAKE_EXPORT ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  record("ncclCommDestroy");
  delete reinterpret_cast<int *>(comm);
  return ncclSuccess;
}

FAKE_EXPORT ncclResult_t ncclCommAbort(ncclComm_t comm) {
  record("ncclCommAbort");
  delete reinterpret_cast<int *>(comm);
  return ncclSuccess;
}

FAKE_EXPORT ncclResult_t ncclCommGetAsyncError(ncclComm_t,
                                               ncclResult_t *async) {
  const char *env = std::getenv("KILN_FAKE_RCCL_ASYNC_ERROR");
  *async = env ? ncclResult_t(std::atoi(env)) : ncclSuccess;
  return ncclSuccess;
}

FAKE_EXPORT ncclResult_t ncclAllReduce(const void *send, void *recv,
                                       size_t count, ncclDataType_t type,
                                       ncclRedOp_t op, ncclComm_t, void *) {
  record("ncclAllReduce");
  if (op != ncclSum)
    return ncclInvalidArgument;
#ifdef KILN_FAKE_RCCL_MPI
  return mpiResult(MPI_Allreduce(send == recv ? MPI_IN_PLACE : send, recv,
                                 int(count), mpiType(type), MPI_SUM,
                                 MPI_COMM_WORLD));
#else
  copy(recv, send, bytesOf(count, type));
  return ncclSuccess;
#endif
}

FAKE_EXPORT ncclResult_t ncclAllGather(const void *send, void *recv,
                                       size_t count, ncclDataType_t type,
                                       ncclComm_t, void *) {
  record("ncclAllGather");
#ifdef KILN_FAKE_RCCL_MPI
  bool inPlace = static_cast<const char *>(send) ==
                 static_cast<char *>(recv) + worldRank() * bytesOf(count, type);
  return mpiResult(MPI_Allgather(inPlace ? MPI_IN_PLACE : send, int(count),
                                 mpiType(type), recv, int(count), mpiType(type),
                                 MPI_COMM_WORLD));
#else
  copy(recv, send, bytesOf(count, type));
  return ncclSuccess;
#endif
}

FAKE_EXPORT ncclResult_t ncclBroadcast(const void *send, void *recv,
                                       size_t count, ncclDataType_t type,
                                       int root, ncclComm_t, void *) {
  record("ncclBroadcast");
#ifdef KILN_FAKE_RCCL_MPI
  if (root == worldRank())
    copy(recv, send, bytesOf(count, type));
  return mpiResult(
      MPI_Bcast(recv, int(count), mpiType(type), root, MPI_COMM_WORLD));
#else
  if (root != 0)
    return ncclInvalidArgument;
  copy(recv, send, bytesOf(count, type));
  return ncclSuccess;
#endif
}

FAKE_EXPORT ncclResult_t ncclSend(const void *send, size_t count,
                                  ncclDataType_t type, int peer, ncclComm_t,
                                  void *) {
  record("ncclSend");
#ifdef KILN_FAKE_RCCL_MPI
  if (!gGroupDepth)
    return ncclInvalidUsage;
  gRequests.emplace_back();
  return mpiResult(MPI_Isend(send, int(count), mpiType(type), peer, 0,
                             MPI_COMM_WORLD, &gRequests.back()));
#endif
  if (!gGroupDepth || peer != 0)
    return ncclInvalidUsage; // one rank: only itself, inside a group
  gSends.emplace_back(send, bytesOf(count, type));
  return ncclSuccess;
}

FAKE_EXPORT ncclResult_t ncclRecv(void *recv, size_t count, ncclDataType_t type,
                                  int peer, ncclComm_t, void *) {
  record("ncclRecv");
#ifdef KILN_FAKE_RCCL_MPI
  if (!gGroupDepth)
    return ncclInvalidUsage;
  gRequests.emplace_back();
  return mpiResult(MPI_Irecv(recv, int(count), mpiType(type), peer, 0,
                             MPI_COMM_WORLD, &gRequests.back()));
#endif
  if (!gGroupDepth || peer != 0)
    return ncclInvalidUsage;
  gRecvs.emplace_back(recv, bytesOf(count, type));
  return ncclSuccess;
}

FAKE_EXPORT ncclResult_t ncclGroupStart() {
  record("ncclGroupStart");
  ++gGroupDepth;
  return ncclSuccess;
}

FAKE_EXPORT ncclResult_t ncclGroupEnd() {
  record("ncclGroupEnd");
  if (!gGroupDepth)
    return ncclInvalidUsage;
  if (--gGroupDepth)
    return ncclSuccess;
#ifdef KILN_FAKE_RCCL_MPI
  std::vector<MPI_Request> requests;
  requests.swap(gRequests);
  return mpiResult(
      MPI_Waitall(int(requests.size()), requests.data(), MPI_STATUSES_IGNORE));
#endif
  // Sends to self match receives from self in order, as NCCL pairs them.
  bool matched = gSends.size() == gRecvs.size();
  for (size_t i = 0; matched && i < gSends.size(); ++i) {
    matched = gSends[i].second == gRecvs[i].second;
    if (matched)
      copy(gRecvs[i].first, gSends[i].first, gSends[i].second);
  }
  gSends.clear();
  gRecvs.clear();
  return matched ? ncclSuccess : ncclInvalidUsage;
}

#endif // KILN_FAKE_RCCL_INCOMPLETE
