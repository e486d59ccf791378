//===- RankArtifact.h - Which artifact this rank runs -----------*- C++ -*-===//
//
// The runtime tools' handling of multi-rank artifacts (kiln-compile --tp T
// --ep E writes NAME.rank0.kiln ... NAME.rank<T*E-1>.kiln; docs/parallel.md):
// under an MPI launcher with N processes each rank opens its own file and
// only rank 0 writes to stdout; a process count that does not match the
// rank files, or a single process given the name of a split artifact, is an
// error that names both counts.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TOOLS_COMMON_RANKARTIFACT_H
#define KILN_TOOLS_COMMON_RANKARTIFACT_H

#include "runtime/artifact/ArtifactFormat.h"
#include "runtime/comm/Communicator.h"
#include "support/Status.h"

#include <cstdio>
#include <filesystem>
#include <string>

namespace kiln::tools {

/// The artifact this process runs for `path`; on ranks other than 0 stdout
/// goes to /dev/null (the caller also drops its own output files there).
inline Result<std::string> rankArtifact(const std::string &path,
                                        const comm::Communicator &comm) {
  int files = 0;
  while (files < 4096 &&
         std::filesystem::exists(artifact::rankArtifactPath(path, files)))
    ++files;
  const std::string first = artifact::rankArtifactPath(path, 0);
  if (comm.size() == 1) {
    if (!std::filesystem::exists(path) && files > 0)
      return makeError(StatusCode::FailedPrecondition, path,
                       " was compiled for ", files, " ranks (", first,
                       ", ...): run it with mpirun -np ", files);
    return path;
  }
  if (files != comm.size())
    return makeError(
        StatusCode::FailedPrecondition, path, " was compiled for ", files,
        " ranks (", first, ", ...), but this run has ", comm.size(),
        files > 0 ? ": run it with mpirun -np " + std::to_string(files)
                  : std::string());
  if (comm.rank() != 0 && !std::freopen("/dev/null", "w", stdout))
    return makeError(StatusCode::Internal, "rank ", comm.rank(),
                     ": cannot silence stdout");
  return artifact::rankArtifactPath(path, comm.rank());
}

} // namespace kiln::tools

#endif // KILN_TOOLS_COMMON_RANKARTIFACT_H
