//===- MappedFile.h - A read-only memory-mapped file ------------*- C++ -*-===//
//
// Artifact files are mapped, never read: a 400 GB model costs address space,
// not memory. MAP_PRIVATE + PROT_READ, unmapped on destruction.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_SUPPORT_MAPPEDFILE_H
#define KILN_SUPPORT_MAPPEDFILE_H

#include "support/Status.h"

#include <cstdint>
#include <string>

namespace kiln {

class MappedFile {
public:
  /// Maps the whole of the regular file at `path` (an empty file maps to
  /// nothing: data() is null, size() 0).
  static Result<MappedFile> open(const std::string &path);

  MappedFile() = default;
  MappedFile(MappedFile &&other) noexcept;
  MappedFile &operator=(MappedFile &&other) noexcept;
  MappedFile(const MappedFile &) = delete;
  MappedFile &operator=(const MappedFile &) = delete;
  ~MappedFile();

  const uint8_t *data() const { return data_; }
  uint64_t size() const { return size_; }
  const std::string &path() const { return path_; }

private:
  void reset();

  std::string path_;
  const uint8_t *data_ = nullptr;
  uint64_t size_ = 0;
};

} // namespace kiln

#endif // KILN_SUPPORT_MAPPEDFILE_H
