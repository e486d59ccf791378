//===- RcclApi.h - The few NCCL/RCCL declarations Kiln uses -----*- C++ -*-===//
//
// Kiln never includes rccl.h or nccl.h and never links RCCL: the CPU build
// needs no ROCm, and librccl is opened at run time (RcclSymbols). These
// declarations mirror nccl.h of NCCL 2.x, whose C ABI RCCL keeps: a 128-byte
// unique id passed by value, int-sized enums with the values below, and
// streams as opaque pointers (hipStream_t).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_COMM_RCCLAPI_H
#define KILN_RUNTIME_COMM_RCCLAPI_H

#include <cstddef>

namespace kiln::comm::rccl {

using ncclComm_t = struct ncclComm *;

inline constexpr size_t NCCL_UNIQUE_ID_BYTES = 128;
struct ncclUniqueId {
  char internal[NCCL_UNIQUE_ID_BYTES];
};
static_assert(sizeof(ncclUniqueId) == 128, "ncclUniqueId is 128 bytes");

enum ncclResult_t : int {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7,
};

enum ncclRedOp_t : int { ncclSum = 0 };

enum ncclDataType_t : int {
  ncclInt32 = 2,
  ncclInt64 = 4,
  ncclFloat32 = 7,
};

// X(name, return type, parameter list): every entry point the backend uses,
// with nccl.h's signatures (cudaStream_t/hipStream_t as void *).
#define KILN_RCCL_SYMBOLS(X)                                                   \
  X(ncclGetErrorString, const char *, (ncclResult_t result))                   \
  X(ncclGetUniqueId, ncclResult_t, (ncclUniqueId * uniqueId))                  \
  X(ncclCommInitRank, ncclResult_t,                                            \
    (ncclComm_t * comm, int nranks, ncclUniqueId commId, int rank))            \
  X(ncclCommDestroy, ncclResult_t, (ncclComm_t comm))                          \
  X(ncclCommAbort, ncclResult_t, (ncclComm_t comm))                            \
  X(ncclCommGetAsyncError, ncclResult_t,                                       \
    (ncclComm_t comm, ncclResult_t * asyncError))                              \
  X(ncclAllReduce, ncclResult_t,                                               \
    (const void *sendbuff, void *recvbuff, size_t count,                       \
     ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, void *stream))  \
  X(ncclAllGather, ncclResult_t,                                               \
    (const void *sendbuff, void *recvbuff, size_t sendcount,                   \
     ncclDataType_t datatype, ncclComm_t comm, void *stream))                  \
  X(ncclBroadcast, ncclResult_t,                                               \
    (const void *sendbuff, void *recvbuff, size_t count,                       \
     ncclDataType_t datatype, int root, ncclComm_t comm, void *stream))        \
  X(ncclSend, ncclResult_t,                                                    \
    (const void *sendbuff, size_t count, ncclDataType_t datatype, int peer,    \
     ncclComm_t comm, void *stream))                                           \
  X(ncclRecv, ncclResult_t,                                                    \
    (void *recvbuff, size_t count, ncclDataType_t datatype, int peer,          \
     ncclComm_t comm, void *stream))                                           \
  X(ncclGroupStart, ncclResult_t, ())                                          \
  X(ncclGroupEnd, ncclResult_t, ())

} // namespace kiln::comm::rccl

#endif // KILN_RUNTIME_COMM_RCCLAPI_H
