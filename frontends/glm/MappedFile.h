//===- MappedFile.h - Read-only memory-mapped files -------------*- C++ -*-===//
//
// A whole file mapped read-only. Pages are only read when touched, so mapping
// a multi-GB shard to parse its header costs one header's worth of I/O.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_FRONTENDS_GLM_MAPPEDFILE_H
#define KILN_FRONTENDS_GLM_MAPPEDFILE_H

#include "runtime/support/Status.h"

#include <cstdint>
#include <string>

namespace kiln::glm {

/// A view of bytes owned by something else (a mapping, a buffer).
struct ByteView {
  const uint8_t *data = nullptr;
  uint64_t size = 0;
};

class MappedFile {
public:
  /// Maps `path` read-only. An empty file maps to an empty view.
  static Result<MappedFile> open(const std::string &path);

  MappedFile() = default;
  MappedFile(MappedFile &&other) noexcept;
  MappedFile &operator=(MappedFile &&other) noexcept;
  MappedFile(const MappedFile &) = delete;
  MappedFile &operator=(const MappedFile &) = delete;
  ~MappedFile();

  const std::string &path() const { return path_; }
  ByteView bytes() const { return {data_, size_}; }
  uint64_t size() const { return size_; }

private:
  void reset();

  std::string path_;
  const uint8_t *data_ = nullptr;
  uint64_t size_ = 0;
};

} // namespace kiln::glm

#endif // KILN_FRONTENDS_GLM_MAPPEDFILE_H
