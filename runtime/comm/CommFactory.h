//===- CommFactory.h - Choosing a communicator ------------------*- C++ -*-===//
//
// makeCommunicator(Auto) is what a tool calls: MPI when an MPI launcher
// started the process, otherwise a single process.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_COMM_COMMFACTORY_H
#define KILN_RUNTIME_COMM_COMMFACTORY_H

#include "runtime/comm/Communicator.h"

#include <memory>
#include <string>

namespace kiln::comm {

enum class CommKind { Auto, SingleProcess, Mpi, Rccl };

/// "auto", "single-process", "mpi" or "rccl".
Result<CommKind> parseCommKind(const std::string &name);
const char *commKindName(CommKind kind);

/// The environment variable an MPI launcher set for this process
/// (OMPI_COMM_WORLD_SIZE from Open MPI's mpirun, PMIX_RANK from PMIx
/// launchers, PMI_RANK from MPICH's hydra), or null when none is set.
const char *mpiLauncherVariable();

/// Auto: Mpi when mpiLauncherVariable() is set, else SingleProcess. Rccl:
/// RCCL bootstrapped over the Auto communicator.
Result<std::unique_ptr<Communicator>>
makeCommunicator(CommKind kind = CommKind::Auto,
                 const CommOptions &options = {});

} // namespace kiln::comm

#endif // KILN_RUNTIME_COMM_COMMFACTORY_H
