//===- SafetensorsWriter.h - Streaming safetensors writer -------*- C++ -*-===//
//
// Writes a safetensors file whose tensors are declared up front; the header is
// written immediately and each tensor's bytes are then appended in declaration
// order, in as many chunks as the caller likes. Memory use is O(header), so a
// multi-GB synthetic checkpoint can be written one tensor (or chunk) at a
// time. Used by tests and tools to build good and deliberately bad files.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_FRONTENDS_GLM_SAFETENSORSWRITER_H
#define KILN_FRONTENDS_GLM_SAFETENSORSWRITER_H

#include "support/Dtype.h"
#include "support/Status.h"

#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::glm {

struct TensorDecl {
  std::string name;
  Dtype dtype = Dtype::BF16;
  std::vector<int64_t> shape;
};

class SafetensorsWriter {
public:
  /// Creates `path` (truncating it) and writes the header. The header is
  /// padded with spaces to a multiple of 8 bytes, as the reference writer
  /// does; tensors are laid out contiguously in declaration order.
  static Result<SafetensorsWriter> create(
      const std::string &path, std::vector<TensorDecl> tensors,
      const std::map<std::string, std::string> &metadata = {{"format", "pt"}});

  SafetensorsWriter(SafetensorsWriter &&) noexcept;
  SafetensorsWriter &operator=(SafetensorsWriter &&) noexcept;
  ~SafetensorsWriter();

  /// Appends bytes to the current tensor, moving on to the next once it is
  /// full. A chunk may not cross a tensor boundary. Zero-byte tensors need
  /// no data and are stepped over.
  Status append(const void *data, uint64_t size);
  /// Writes the whole of the next tensor, which must be named `name`.
  Status writeTensor(std::string_view name, const void *data, uint64_t size);
  /// Checks that every declared byte was written and closes the file.
  Status finish();

  /// The next tensor expected, or empty when all are written.
  std::string nextTensor() const;

private:
  SafetensorsWriter() = default;
  // Steps over declared tensors of zero bytes at the write position.
  void skipEmptyTensors();

  std::string path_;
  std::FILE *out_ = nullptr;
  std::vector<TensorDecl> tensors_;
  std::vector<uint64_t> sizes_;
  size_t current_ = 0;
  uint64_t writtenInCurrent_ = 0;
};

/// Writes `model.safetensors.index.json` style JSON to `path`:
/// {"metadata": {"total_size": totalSize}, "weight_map": weightMap}.
Status
writeSafetensorsIndex(const std::string &path,
                      const std::map<std::string, std::string> &weightMap,
                      uint64_t totalSize);

} // namespace kiln::glm

#endif // KILN_FRONTENDS_GLM_SAFETENSORSWRITER_H
