//===- Rccl.cpp - The RCCL communicator -----------------------------------===//

#include "runtime/comm/Rccl.h"
#include "runtime/comm/RcclApi.h"
#include "runtime/support/DynamicLibrary.h"

#include <array>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>

using namespace kiln;
using namespace kiln::comm;
using namespace kiln::comm::rccl;

std::vector<std::string> kiln::comm::defaultRcclLibraries() {
  std::vector<std::string> names;
  if (const char *env = std::getenv("KILN_RCCL_LIBRARY"); env && *env)
    names.push_back(env);
  for (const char *name :
       {"librccl.so", "librccl.so.1", "/opt/rocm/lib/librccl.so"})
    names.push_back(name);
  return names;
}

namespace {

/// librccl's entry points, resolved once.
class RcclSymbols {
public:
#define KILN_RCCL_DECLARE(name, ret, params) ret(*name) params = nullptr;
  KILN_RCCL_SYMBOLS(KILN_RCCL_DECLARE)
#undef KILN_RCCL_DECLARE

  static Result<std::shared_ptr<RcclSymbols>>
  load(const std::vector<std::string> &libraries);

  const std::string &path() const { return path_; }
  ~RcclSymbols() {
    if (handle_)
      dlclose(handle_);
  }

private:
  void *handle_ = nullptr;
  std::string path_;
};

Result<std::shared_ptr<RcclSymbols>>
RcclSymbols::load(const std::vector<std::string> &libraries) {
  std::shared_ptr<RcclSymbols> symbols(new RcclSymbols());
#define KILN_RCCL_SLOT(name, ret, params) {#name, &symbols->name},
  OpenedLibrary opened =
      openLibrary(libraries, {KILN_RCCL_SYMBOLS(KILN_RCCL_SLOT)});
#undef KILN_RCCL_SLOT
  if (opened.missing)
    return makeError(StatusCode::Unavailable, "RCCL library ", opened.path,
                     " lacks the symbol ", opened.missing,
                     ": it is not a usable librccl (NCCL 2.x API)");
  if (!opened.handle)
    return makeError(StatusCode::Unavailable,
                     "RCCL (librccl.so) not found: the rccl backend needs "
                     "ROCm's RCCL (set KILN_RCCL_LIBRARY to its path); use the "
                     "mpi or single-process backend on CPUs (tried: ",
                     opened.tried, ")");
  symbols->handle_ = opened.handle;
  symbols->path_ = opened.path;
  return symbols;
}

/// "ncclResult_t N (description)".
std::string describe(const RcclSymbols &symbols, int result) {
  const char *what = symbols.ncclGetErrorString(ncclResult_t(result));
  return "ncclResult_t " + std::to_string(result) + " (" +
         (what ? what : "no description") + ")";
}

ncclDataType_t ncclType(DataType type) {
  switch (type) {
  case DataType::F32:
    return ncclFloat32;
  case DataType::I32:
    return ncclInt32;
  case DataType::I64:
    return ncclInt64;
  }
  return ncclFloat32;
}

/// `base` advanced by `elements` of `type`: device addresses, never read.
template <typename P> P *offset(P *base, size_t elements, DataType type) {
  using Byte = std::conditional_t<std::is_const_v<P>, const char, char>;
  return reinterpret_cast<Byte *>(base) + elements * dataTypeSize(type);
}

class Rccl final : public RcclCommunicator {
public:
  Rccl(std::unique_ptr<Communicator> bootstrap,
       std::shared_ptr<RcclSymbols> symbols, ncclComm_t comm, void *stream)
      : RcclCommunicator(bootstrap->rank(), bootstrap->size()),
        bootstrap_(std::move(bootstrap)), symbols_(std::move(symbols)),
        comm_(comm), stream_(stream) {}
  ~Rccl() override {
    if (comm_)
      symbols_->ncclCommDestroy(comm_);
  }

  const char *backendName() const override { return "rccl"; }
  const std::string &libraryPath() const override { return symbols_->path(); }
  void setRankOrderSum(DeviceRankOrderSum sum) override {
    rankOrderSum_ = std::move(sum);
  }

  Status asyncError() override { return pending("asyncError"); }

  Status barrier() override {
    KILN_RETURN_IF_ERROR(pending("barrier"));
    return bootstrap_->barrier();
  }

  [[noreturn]] void abortAll(const std::string &message) override {
    if (comm_)
      symbols_->ncclCommAbort(comm_);
    comm_ = nullptr;
    bootstrap_->abortAll(message);
    std::_Exit(1); // not reached: the bootstrap's abortAll does not return
  }

protected:
  Status doAllReduceSum(const void *send, void *recv, size_t count,
                        DataType type, int group) override {
    KILN_RETURN_IF_ERROR(pending("allReduceSum"));
    if (type != DataType::F32 && group != size())
      return makeError(StatusCode::FailedPrecondition, where("allReduceSum"),
                       "an integer sum over groups of ", group,
                       " ranks needs a communicator per group, which the "
                       "RCCL backend does not make (float sums gather "
                       "every rank's part and add the group's)");
    if (type != DataType::F32) // exact: integer sums do not depend on order
      return check("allReduceSum", "ncclAllReduce",
                   symbols_->ncclAllReduce(send, recv, count, ncclType(type),
                                           ncclSum, comm_, stream_));
    if (!rankOrderSum_.scratch || !rankOrderSum_.sum)
      return makeError(
          StatusCode::FailedPrecondition, where("allReduceSum"),
          "a float sum in rank order needs the GPU path's device sum "
          "(RcclCommunicator::setRankOrderSum); none is installed");
    KILN_ASSIGN_OR_RETURN(
        void *gathered,
        rankOrderSum_.scratch(count * dataTypeSize(type) * size_t(size())));
    KILN_RETURN_IF_ERROR(doAllGather(send, gathered, count, type));
    // This rank's group is ranks [first, first + group): their parts are
    // consecutive in the gathered buffer.
    size_t first = size_t(rank() / group * group);
    void *part =
        static_cast<char *>(gathered) + first * count * dataTypeSize(type);
    return rankOrderSum_.sum(part, recv, count, group, stream_)
        .withContext(where("allReduceSum") + "the device sum");
  }

  Status doAllGather(const void *send, void *recv, size_t count,
                     DataType type) override {
    KILN_RETURN_IF_ERROR(pending("allGather"));
    return check("allGather", "ncclAllGather",
                 symbols_->ncclAllGather(send, recv, count, ncclType(type),
                                         comm_, stream_));
  }

  Status doAllGatherV(Bytes send, void *recv, const Counts &recvCounts,
                      const Counts &recvDispls, DataType type) override {
    // One broadcast per rank with a piece; every rank skips the same empty
    // ones, since the counts are the same everywhere.
    return group("allGatherV", [&]() -> Status {
      for (int r = 0; r < size(); ++r) {
        if (!recvCounts[r])
          continue;
        void *piece = offset(recv, recvDispls[r], type);
        KILN_RETURN_IF_ERROR(
            check("allGatherV", "ncclBroadcast",
                  symbols_->ncclBroadcast(r == rank() ? send.data : piece,
                                          piece, recvCounts[r], ncclType(type),
                                          r, comm_, stream_)));
      }
      return Status::ok();
    });
  }

  Status doAllToAllV(const void *send, const Counts &sendCounts,
                     const Counts &sendDispls, void *recv,
                     const Counts &recvCounts, const Counts &recvDispls,
                     DataType type) override {
    return group("allToAllV", [&]() -> Status {
      for (int p = 0; p < size(); ++p) {
        if (sendCounts[p])
          KILN_RETURN_IF_ERROR(
              check("allToAllV", "ncclSend",
                    symbols_->ncclSend(offset(send, sendDispls[p], type),
                                       sendCounts[p], ncclType(type), p, comm_,
                                       stream_)));
        if (recvCounts[p])
          KILN_RETURN_IF_ERROR(
              check("allToAllV", "ncclRecv",
                    symbols_->ncclRecv(offset(recv, recvDispls[p], type),
                                       recvCounts[p], ncclType(type), p, comm_,
                                       stream_)));
      }
      return Status::ok();
    });
  }

  Status doBroadcast(void *buffer, size_t count, int root,
                     DataType type) override {
    KILN_RETURN_IF_ERROR(pending("broadcast"));
    return check("broadcast", "ncclBroadcast",
                 symbols_->ncclBroadcast(buffer, buffer, count, ncclType(type),
                                         root, comm_, stream_));
  }

private:
  /// An error RCCL noticed since the last call, named for `collective`.
  Status pending(const char *collective) const {
    ncclResult_t async = ncclSuccess;
    KILN_RETURN_IF_ERROR(check(collective, "ncclCommGetAsyncError",
                               symbols_->ncclCommGetAsyncError(comm_, &async)));
    if (async == ncclSuccess)
      return Status::ok();
    return makeError(StatusCode::Internal, where(collective),
                     "an earlier operation failed asynchronously with ",
                     describe(*symbols_, async));
  }

  Status check(const char *collective, const char *call,
               ncclResult_t result) const {
    if (result == ncclSuccess)
      return Status::ok();
    return makeError(StatusCode::Internal, where(collective), call,
                     " failed with ", describe(*symbols_, result));
  }

  /// Runs `body` between ncclGroupStart and ncclGroupEnd; the group is
  /// closed even when a call in it failed.
  template <typename Body> Status group(const char *collective, Body body) {
    KILN_RETURN_IF_ERROR(pending(collective));
    KILN_RETURN_IF_ERROR(
        check(collective, "ncclGroupStart", symbols_->ncclGroupStart()));
    Status inside = body();
    Status end = check(collective, "ncclGroupEnd", symbols_->ncclGroupEnd());
    return inside.isOk() ? end : inside;
  }

  std::unique_ptr<Communicator> bootstrap_;
  std::shared_ptr<RcclSymbols> symbols_;
  ncclComm_t comm_;
  void *stream_;
  DeviceRankOrderSum rankOrderSum_;
};

/// Rank 0 makes the id and broadcasts it over `bootstrap` with a flag, so
/// the other ranks fail with rank 0's error instead of waiting for an id
/// that never comes.
Result<ncclUniqueId> agreeOnId(Communicator &bootstrap,
                               const RcclSymbols &symbols) {
  constexpr size_t kWords = NCCL_UNIQUE_ID_BYTES / sizeof(int32_t);
  std::array<int32_t, 1 + kWords> message{};
  ncclUniqueId id{};
  ncclResult_t made = ncclSuccess;
  if (bootstrap.rank() == 0) {
    made = symbols.ncclGetUniqueId(&id);
    message[0] = made;
    std::memcpy(&message[1], id.internal, sizeof(id.internal));
  }
  KILN_RETURN_IF_ERROR(bootstrap.broadcast(message, 0)
                           .withContext("rccl: broadcasting the ncclUniqueId"));
  if (message[0] != ncclSuccess)
    return makeError(StatusCode::Internal,
                     "rccl: ncclGetUniqueId on rank 0 failed with ",
                     describe(symbols, message[0]));
  std::memcpy(id.internal, &message[1], sizeof(id.internal));
  return id;
}

} // namespace

Result<std::unique_ptr<RcclCommunicator>>
kiln::comm::makeRcclCommunicator(std::unique_ptr<Communicator> bootstrap,
                                 const CommOptions &options) {
  if (!bootstrap)
    return makeError(StatusCode::InvalidArgument,
                     "rccl: no bootstrap communicator to agree on an id");
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<RcclSymbols> symbols,
                        RcclSymbols::load(options.rcclLibraries.empty()
                                              ? defaultRcclLibraries()
                                              : options.rcclLibraries));
  KILN_ASSIGN_OR_RETURN(ncclUniqueId id, agreeOnId(*bootstrap, *symbols));
  ncclComm_t comm = nullptr;
  ncclResult_t joined = symbols->ncclCommInitRank(&comm, bootstrap->size(), id,
                                                  bootstrap->rank());
  if (joined != ncclSuccess)
    return makeError(StatusCode::Unavailable, "rccl: ncclCommInitRank on rank ",
                     bootstrap->rank(), " of ", bootstrap->size(),
                     " failed with ", describe(*symbols, joined));
  return std::unique_ptr<RcclCommunicator>(
      new Rccl(std::move(bootstrap), std::move(symbols), comm, options.stream));
}
