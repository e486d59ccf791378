//===- MpiUnavailable.cpp - The MPI entry points of a build without MPI ---===//
//
// Compiled instead of Mpi.cpp when CMake finds no MPI: the factory then says
// how to get the backend instead of failing to link.
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/Mpi.h"

using namespace kiln;
using namespace kiln::comm;

bool kiln::comm::mpiAvailable() { return false; }

Result<std::unique_ptr<Communicator>>
kiln::comm::makeMpiCommunicator(const CommOptions &) {
  return makeError(StatusCode::Unavailable,
                   "this build has no MPI backend: install openmpi-bin and "
                   "libopenmpi-dev (scripts/setup-deps.sh) and reconfigure");
}
