//===- Artifact.h - A loaded, verified Kiln artifact ------------*- C++ -*-===//
//
// Artifact::open maps every file of an artifact and verifies it once, in
// this order:
//   1. file 0: size, magic ("not a Kiln artifact"), format version (before
//      anything else the header says), header CRC32C, recorded file size;
//   2. the metadata: bounds, CRC32C, FlatBuffers verifier (depth and table
//      limits), file identifier "KILN";
//   3. every other file listed in Artifact.files: mapped, its header checked
//      (same artifact id, the expected index and count);
//   4. the semantic walk (ArtifactChecks.h): every index, extent, shape and
//      size the runtime will trust;
//   5. unless disabled, the CRC32C of every segment over the mapped bytes.
// After a successful open nothing the runtime reads through meta() or
// bytes() can be out of bounds.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_ARTIFACT_ARTIFACT_H
#define KILN_RUNTIME_ARTIFACT_ARTIFACT_H

#include "runtime/artifact/ArtifactFormat.h"
#include "runtime/artifact/kiln_artifact_generated.h"
#include "support/MappedFile.h"
#include "support/Status.h"

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::artifact {

struct OpenOptions {
  /// Check the CRC32C of every segment (reads every byte of the model).
  bool verifyChecksums = true;
};

class Artifact {
public:
  static Result<std::unique_ptr<Artifact>> open(const std::string &path,
                                                OpenOptions options = {});

  Artifact(const Artifact &) = delete;
  Artifact &operator=(const Artifact &) = delete;

  /// The verified metadata; valid as long as this Artifact.
  const fb::Artifact *meta() const { return meta_; }
  /// The first byte of `extent` in the mapping, or null if the extent is not
  /// inside one of this artifact's files (every extent in meta() is).
  const uint8_t *bytes(const fb::Extent &extent) const;

  /// File 0's path, as given to open().
  const std::string &path() const { return files_[0].path(); }
  /// File 0's header (the other files' headers agree on id and count).
  const FileHeader &header() const { return header_; }
  uint32_t fileCount() const { return static_cast<uint32_t>(files_.size()); }
  /// Path and size of file `index` < fileCount().
  const std::string &filePath(uint32_t index) const {
    return files_[index].path();
  }
  uint64_t fileSize(uint32_t index) const { return files_[index].size(); }

  /// The plan named `name`, or null.
  const fb::Plan *findPlan(std::string_view name) const;

private:
  Artifact() = default;
  Status openFile0(const std::string &path);
  Status openSplitFiles();

  std::vector<MappedFile> files_;
  FileHeader header_{};
  const fb::Artifact *meta_ = nullptr;
};

} // namespace kiln::artifact

#endif // KILN_RUNTIME_ARTIFACT_ARTIFACT_H
