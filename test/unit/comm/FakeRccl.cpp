//===- FakeRccl.cpp - A one-rank librccl on host memory -------------------===//
//
// Stands in for librccl in the RCCL backend's tests on machines without
// ROCm: the NCCL entry points for a communicator of one rank, with "device"
// buffers in host memory, so that the backend's calls (groups of send/recv,
// broadcasts, the id exchange) run for real. Built twice: complete, and with
// KILN_FAKE_RCCL_INCOMPLETE, lacking every symbol after ncclGetUniqueId.
// $KILN_FAKE_RCCL_ASYNC_ERROR makes ncclCommGetAsyncError report that code.
// fakeRcclCalls() lists the calls made, for the tests to read.
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/RcclApi.h"

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
  if (nranks != 1 || rank != 0)
    return ncclInvalidUsage;
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
  copy(recv, send, bytesOf(count, type));
  return ncclSuccess;
}

FAKE_EXPORT ncclResult_t ncclAllGather(const void *send, void *recv,
                                       size_t count, ncclDataType_t type,
                                       ncclComm_t, void *) {
  record("ncclAllGather");
  copy(recv, send, bytesOf(count, type));
  return ncclSuccess;
}

FAKE_EXPORT ncclResult_t ncclBroadcast(const void *send, void *recv,
                                       size_t count, ncclDataType_t type,
                                       int root, ncclComm_t, void *) {
  record("ncclBroadcast");
  if (root != 0)
    return ncclInvalidArgument;
  copy(recv, send, bytesOf(count, type));
  return ncclSuccess;
}

FAKE_EXPORT ncclResult_t ncclSend(const void *send, size_t count,
                                  ncclDataType_t type, int peer, ncclComm_t,
                                  void *) {
  record("ncclSend");
  if (!gGroupDepth || peer != 0)
    return ncclInvalidUsage; // one rank: only itself, inside a group
  gSends.emplace_back(send, bytesOf(count, type));
  return ncclSuccess;
}

FAKE_EXPORT ncclResult_t ncclRecv(void *recv, size_t count, ncclDataType_t type,
                                  int peer, ncclComm_t, void *) {
  record("ncclRecv");
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
