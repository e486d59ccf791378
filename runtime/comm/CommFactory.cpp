//===- CommFactory.cpp ----------------------------------------------------===//

#include "runtime/comm/CommFactory.h"
#include "runtime/comm/Mpi.h"
#include "runtime/comm/Rccl.h"
#include "runtime/comm/SingleProcess.h"

#include <cstdlib>

using namespace kiln;
using namespace kiln::comm;

namespace {

const std::pair<CommKind, const char *> kNames[] = {
    {CommKind::Auto, "auto"},
    {CommKind::SingleProcess, "single-process"},
    {CommKind::Mpi, "mpi"},
    {CommKind::Rccl, "rccl"}};

} // namespace

Result<CommKind> kiln::comm::parseCommKind(const std::string &name) {
  for (const auto &[kind, spelled] : kNames)
    if (name == spelled)
      return kind;
  return makeError(StatusCode::InvalidArgument, "communicator '", name,
                   "' is unknown, expected auto, single-process, mpi or rccl");
}

const char *kiln::comm::commKindName(CommKind kind) {
  for (const auto &[known, spelled] : kNames)
    if (known == kind)
      return spelled;
  return "unknown";
}

const char *kiln::comm::mpiLauncherVariable() {
  for (const char *name : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK"})
    if (const char *value = std::getenv(name); value && *value)
      return name;
  return nullptr;
}

Result<std::unique_ptr<Communicator>>
kiln::comm::makeCommunicator(CommKind kind, const CommOptions &options) {
  switch (kind) {
  case CommKind::SingleProcess:
    return makeSingleProcessCommunicator();
  case CommKind::Mpi:
    return makeMpiCommunicator(options);
  case CommKind::Auto:
    if (const char *variable = mpiLauncherVariable()) {
      Result<std::unique_ptr<Communicator>> mpi = makeMpiCommunicator(options);
      if (!mpi.isOk())
        return mpi.status().withContext(std::string("started by an MPI "
                                                    "launcher (") +
                                        variable + " is set)");
      return mpi;
    }
    return makeSingleProcessCommunicator();
  case CommKind::Rccl: {
    KILN_ASSIGN_OR_RETURN(std::unique_ptr<Communicator> bootstrap,
                          makeCommunicator(CommKind::Auto, options));
    KILN_ASSIGN_OR_RETURN(std::unique_ptr<RcclCommunicator> rccl,
                          makeRcclCommunicator(std::move(bootstrap), options));
    return std::unique_ptr<Communicator>(std::move(rccl));
  }
  }
  return makeError(StatusCode::InvalidArgument, "unknown communicator kind");
}
