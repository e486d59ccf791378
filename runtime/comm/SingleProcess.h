//===- SingleProcess.h - The size-1 communicator ----------------*- C++ -*-===//
//
// One rank, no peers: gathers and all-to-alls are copies, broadcast and
// barrier do nothing. What kiln-run uses when it is not launched by mpirun.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_COMM_SINGLEPROCESS_H
#define KILN_RUNTIME_COMM_SINGLEPROCESS_H

#include "runtime/comm/Communicator.h"

#include <memory>

namespace kiln::comm {

std::unique_ptr<Communicator> makeSingleProcessCommunicator();

} // namespace kiln::comm

#endif // KILN_RUNTIME_COMM_SINGLEPROCESS_H
