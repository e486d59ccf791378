//===- Mpi.h - Collectives between processes over MPI -----------*- C++ -*-===//
//
// CPU ranks launched by mpirun (Open MPI 4.1 from Debian). Every collective
// is a nonblocking MPI call polled with MPI_Test against a deadline, so a
// rank that died or hangs turns into an error naming the collective, the
// rank and the seconds waited, never a silent hang. MPI errors come back as
// Status values (MPI_ERRORS_RETURN). After a timeout the communicator is
// unusable (MPI cannot cancel a collective its peers may still complete):
// the tool prints the error and calls abortAll.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_COMM_MPI_H
#define KILN_RUNTIME_COMM_MPI_H

#include "runtime/comm/Communicator.h"

#include <memory>

namespace kiln::comm {

/// Whether this build has the MPI backend (MPI was found at configure time).
bool mpiAvailable();

/// Initializes MPI on first use (MPI_THREAD_SERIALIZED: any thread, one at a
/// time; finalized at exit unless a collective timed out) and returns a
/// communicator over a duplicate of MPI_COMM_WORLD. Unavailable when the
/// build has no MPI.
Result<std::unique_ptr<Communicator>>
makeMpiCommunicator(const CommOptions &options = {});

} // namespace kiln::comm

#endif // KILN_RUNTIME_COMM_MPI_H
