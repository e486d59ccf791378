//===- Safetensors.h - Strict safetensors reader ----------------*- C++ -*-===//
//
// A safetensors file is an 8-byte little-endian header length N, N bytes of
// JSON
//   {"<tensor>": {"dtype": "BF16", "shape": [..], "data_offsets": [b, e]},
//    "__metadata__": {"<key>": "<string>"}}
// and then the data section; offsets are relative to its start.
//
// The reader maps the file and validates the header completely before any
// tensor is handed out: header length and position, JSON well-formedness and
// types, no duplicate names, known dtypes, bounded rank and dims, byte size =
// elements x dtype size (overflow-checked), offsets inside the file and no two
// tensors' byte ranges overlapping. Gaps between tensors are allowed. Tensor
// bytes are never read here; TensorInfo::bytes() is a view into the mapping.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_FRONTENDS_GLM_SAFETENSORS_H
#define KILN_FRONTENDS_GLM_SAFETENSORS_H

#include "frontends/glm/MappedFile.h"
#include "support/Dtype.h"
#include "support/Status.h"
#include "support/TensorSource.h"

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::glm {

/// Limits that protect the reader from hostile headers. Errors quote the
/// limit's name and the value found. The defaults fit GLM-5 shards with room
/// to spare; tests and fuzzers may lower them.
struct SafetensorsLimits {
  uint64_t maxHeaderBytes = 100ull << 20; // 100 MiB
  uint64_t maxTensorsPerFile = 1u << 20;
  uint64_t maxTensorRank = 8;
  uint64_t maxDimSize = 1ull << 40;
  uint64_t maxTensorNameBytes = 1024;
};

/// A tensor of a safetensors file: the view every weight source gives
/// (name, dtype, shape, byteSize, and data pointing into the owner's mapping
/// or buffer, valid while it lives), and where its bytes are.
struct TensorInfo : TensorView {
  /// The safetensors file that holds the bytes.
  std::string file;
  /// Absolute offset of the first byte within `file`.
  uint64_t fileOffset = 0;

  ByteView bytes() const { return {data, byteSize}; }
};

struct SafetensorsHeader {
  /// N, the JSON header's length in bytes.
  uint64_t headerBytes = 0;
  /// Sorted by name.
  std::vector<TensorInfo> tensors;
  std::map<std::string, std::string> metadata;
};

/// Validates a complete safetensors image held in memory. `path` is only used
/// in messages and copied into TensorInfo::file. This is the entry point the
/// fuzzer drives.
Result<SafetensorsHeader>
parseSafetensors(ByteView file, const std::string &path,
                 const SafetensorsLimits &limits = SafetensorsLimits());

/// One mapped and validated safetensors file.
class SafetensorsFile {
public:
  SafetensorsFile() = default;
  SafetensorsFile(SafetensorsFile &&) = default;
  SafetensorsFile &operator=(SafetensorsFile &&) = default;
  SafetensorsFile(const SafetensorsFile &) = delete;
  SafetensorsFile &operator=(const SafetensorsFile &) = delete;

  static Result<SafetensorsFile>
  open(const std::string &path,
       const SafetensorsLimits &limits = SafetensorsLimits());

  const std::string &path() const { return file_.path(); }
  /// Sorted by name.
  const std::vector<TensorInfo> &tensors() const { return header_.tensors; }
  const std::map<std::string, std::string> &metadata() const {
    return header_.metadata;
  }
  uint64_t headerBytes() const { return header_.headerBytes; }
  /// nullptr when absent.
  const TensorInfo *find(std::string_view name) const;

private:
  MappedFile file_;
  SafetensorsHeader header_;
};

} // namespace kiln::glm

#endif // KILN_FRONTENDS_GLM_SAFETENSORS_H
