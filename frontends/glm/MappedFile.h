//===- MappedFile.h - Read-only memory-mapped files -------------*- C++ -*-===//
//
// A whole file mapped read-only. Pages are only read when touched, so mapping
// a multi-GB shard to parse its header costs one header's worth of I/O.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_FRONTENDS_GLM_MAPPEDFILE_H
#define KILN_FRONTENDS_GLM_MAPPEDFILE_H

#include "support/MappedFile.h"
#include "support/Status.h"

#include <cstdint>
#include <string>

namespace kiln::glm {

/// A view of bytes owned by something else (a mapping, a buffer).
struct ByteView {
  const uint8_t *data = nullptr;
  uint64_t size = 0;
};

/// The checkpoint readers map files with the shared MappedFile (support/).
using kiln::MappedFile;

inline ByteView bytesOf(const MappedFile &file) {
  return {file.data(), file.size()};
}

} // namespace kiln::glm

#endif // KILN_FRONTENDS_GLM_MAPPEDFILE_H
